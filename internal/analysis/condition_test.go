package analysis

import (
	"context"
	"strings"
	"testing"
)

// EX-6: conditions follow Argo Rollouts' rules for every combination (only success, only failure, both), and
// compare numbers across int and double; an evaluation error or a non-bool value is Error, never Successful.
func TestConditionsEvaluate(t *testing.T) {
	pods := func(ready, notReady, restarts int64) any {
		return PodsResult{Ready: ready, NotReady: notReady, Restarts: restarts, Total: ready + notReady}.celValue()
	}
	cases := []struct {
		name, success, failure string
		result                 any
		want                   Phase
		why                    string // a substring of the message
	}{
		{"success only, true", "result < 0.05", "", 0.01, PhaseSuccessful, `successCondition "result < 0.05" is true`},
		{"success only, false", "result < 0.05", "", 0.4, PhaseFailed, `successCondition "result < 0.05" is false`},
		{"failure only, true", "", "result > 0.1", 0.4, PhaseFailed, `failureCondition "result > 0.1" is true`},
		{"failure only, false", "", "result > 0.1", 0.01, PhaseSuccessful, `failureCondition "result > 0.1" is false`},
		{"both, failure true", "result < 0.05", "result > 0.1", 0.4, PhaseFailed, "failureCondition"},
		{"both, success true", "result < 0.05", "result > 0.1", 0.01, PhaseSuccessful, "is true and failureCondition"},
		{"both, neither", "result < 0.05", "result > 0.1", 0.07, PhaseInconclusive, "neither"},
		{"both true: failure wins", "result < 1", "result > 0", 0.5, PhaseFailed, "failureCondition"},
		{"double against int", "result < 1", "", 0.5, PhaseSuccessful, "is true"},
		{"double equals int", "result == 0", "", 0.0, PhaseSuccessful, "is true"},
		{"int against int", "result.restarts == 0 && result.notReady == 0", "", pods(3, 0, 0), PhaseSuccessful, "is true"},
		{"int against double", "result.restarts <= 0.5", "", pods(3, 0, 1), PhaseFailed, "is false"},
		{"pods failure", "", "result.restarts > 0", pods(2, 1, 4), PhaseFailed, "is true"},
		{"missing key", "result.restart == 0", "", pods(3, 0, 0), PhaseError, "no such key: restart"},
		{"Argo's result[0]", "result[0] < 0.05", "", 0.01, PhaseError, "write result < 0.05 where Argo writes result[0] < 0.05"},
		{"not a bool", "result", "", 0.5, PhaseError, "evaluated to 0.5 (double), want a bool"},
		{"no overload", "result < 1", "", "text", PhaseError, "no such overload"},
		{"error in failure", "result < 1", "result.x > 1", 0.5, PhaseError, `failureCondition "result.x > 1"`},
		{"cost limit", "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, result < a+b+c+d))))", "", 0.5, PhaseError, "cost limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := CompileConditions(tc.success, tc.failure)
			if err != nil {
				t.Fatal(err)
			}
			phase, why := c.Evaluate(context.Background(), tc.result)
			if phase != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("Evaluate(%v) = %s %q, want %s with %q", tc.result, phase, why, tc.want, tc.why)
			}
		})
	}
}

// CompileConditions refuses what could never evaluate to a bool, and no condition at all.
func TestCompileConditionsRefuses(t *testing.T) {
	cases := []struct{ name, success, failure, want string }{
		{"none", "", "", "no successCondition or failureCondition"},
		{"syntax", "result <", "", `successCondition "result <" does not compile`},
		{"string type", "", "'a' + 'b'", `failureCondition "'a' + 'b'" has type string, want bool`},
		{"undeclared", "x > 1", "", "undeclared reference to 'x'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := CompileConditions(tc.success, tc.failure); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CompileConditions = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
