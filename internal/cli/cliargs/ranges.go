package cliargs

import (
	"cmp"
	"fmt"
)

// InRange returns nil when lo <= v <= hi, else the error "<flag> must be in <lo>..<hi>, got <v>". flag is the
// flag as typed ("--zones"); durations print as durations (1s).
func InRange[T cmp.Ordered](flag string, v, lo, hi T) error {
	if !(v >= lo && v <= hi) { // NaN too
		return fmt.Errorf("%s must be in %v..%v, got %v", flag, lo, hi, v)
	}
	return nil
}

// AtLeast returns nil when v >= lo, else the error "<flag> must be at least <lo>, got <v>".
func AtLeast[T cmp.Ordered](flag string, v, lo T) error {
	if !(v >= lo) { // NaN too
		return fmt.Errorf("%s must be at least %v, got %v", flag, lo, v)
	}
	return nil
}

// Positive returns nil when v > 0, else the error "<flag> must be greater than 0, got <v>": for rates and for
// durations whose zero would not mean what it says (the packages taking them read 0 as "the default").
func Positive[T cmp.Ordered](flag string, v T) error {
	var zero T
	if !(v > zero) { // NaN too
		return fmt.Errorf("%s must be greater than 0, got %v", flag, v)
	}
	return nil
}

// First returns the first error that is not nil, or nil: the checks of a command's flags in the order of its
// help, of which the user sees the first on one line (errors.Join would print them on several).
func First(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
