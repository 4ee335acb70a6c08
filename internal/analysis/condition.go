package analysis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// Bounds of a condition (EX-6): what one expression may cost to parse and to evaluate.
const (
	// MaxConditionLength is the longest condition accepted, in code points.
	MaxConditionLength = 2048
	// conditionCostLimit bounds one evaluation in CEL's cost units (about one per operation): a few
	// comparisons cost under 10; a runaway comprehension is stopped with an Error measurement.
	conditionCostLimit = 10_000
)

// celEnv is the one CEL environment of conditions, immutable once built: `result` declared dyn (a double
// from Prometheus, a map of int64 from the pods provider) and numbers of different types comparable with
// each other (`result < 1` on a double, `result.restarts <= 1.5` on an int); `==` compares numbers across
// types by value as CEL's heterogeneous equality does (`result == 0` is true for 0.0).
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("result", cel.DynType),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(MaxConditionLength),
	)
})

// Conditions are a metric's successCondition and failureCondition compiled once (EX-6): CEL expressions over
// `result` that must evaluate to a bool. Safe for concurrent use.
type Conditions struct {
	success, failure         cel.Program
	successExpr, failureExpr string
}

// CompileConditions compiles success and failure (either may be empty, not both). Errors, one line each:
// both empty, a syntax or type error, an expression whose type is not bool (or dyn, checked when evaluated).
func CompileConditions(success, failure string) (*Conditions, error) {
	if success == "" && failure == "" {
		return nil, fmt.Errorf("no successCondition or failureCondition")
	}
	c := &Conditions{successExpr: success, failureExpr: failure}
	var err error
	if c.success, err = compileCondition("successCondition", success); err != nil {
		return nil, err
	}
	if c.failure, err = compileCondition("failureCondition", failure); err != nil {
		return nil, err
	}
	return c, nil
}

// compileCondition returns the program of expr, nil for an empty expr.
func compileCondition(field, expr string) (cel.Program, error) {
	if expr == "" {
		return nil, nil
	}
	if n := utf8.RuneCountInString(expr); n > MaxConditionLength {
		return nil, fmt.Errorf("%s is %d characters long, above the maximum %d", field, n, MaxConditionLength)
	}
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%s %q does not compile: %s", field, expr, oneLine(iss.Err().Error()))
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("%s %q has type %s, want bool (e.g. result < 0.05)", field, expr, t)
	}
	prg, err := env.Program(ast, cel.CostLimit(conditionCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("%s %q: %s", field, expr, oneLine(err.Error()))
	}
	return prg, nil
}

// Evaluate classifies result with Argo Rollouts' rules (EX-6): only a successCondition, false → Failed; only
// a failureCondition, false → Successful; both, failure true → Failed, else success true → Successful, else
// Inconclusive. An evaluation error (a missing key, a type with no such operator, the cost limit) or a
// non-bool value is Error. The message names the condition that decided and its outcome, or the error.
func (c *Conditions) Evaluate(ctx context.Context, result any) (Phase, string) {
	success, fail := false, false
	var err error
	if c.success != nil {
		if success, err = evalBool(ctx, c.success, result); err != nil {
			return PhaseError, fmt.Sprintf("successCondition %q: %s", c.successExpr, err)
		}
	}
	if c.failure != nil {
		if fail, err = evalBool(ctx, c.failure, result); err != nil {
			return PhaseError, fmt.Sprintf("failureCondition %q: %s", c.failureExpr, err)
		}
	}
	switch {
	case c.failure == nil && success:
		return PhaseSuccessful, fmt.Sprintf("successCondition %q is true", c.successExpr)
	case c.failure == nil:
		return PhaseFailed, fmt.Sprintf("successCondition %q is false", c.successExpr)
	case fail:
		return PhaseFailed, fmt.Sprintf("failureCondition %q is true", c.failureExpr)
	case c.success == nil:
		return PhaseSuccessful, fmt.Sprintf("failureCondition %q is false", c.failureExpr)
	case success:
		return PhaseSuccessful, fmt.Sprintf("successCondition %q is true and failureCondition %q is false", c.successExpr, c.failureExpr)
	}
	return PhaseInconclusive, fmt.Sprintf("neither successCondition %q nor failureCondition %q is true", c.successExpr, c.failureExpr)
}

// evalBool evaluates prg on result; errors when it fails or its value is not a bool.
func evalBool(ctx context.Context, prg cel.Program, result any) (bool, error) {
	out, _, err := prg.ContextEval(ctx, map[string]any{"result": result})
	if err != nil {
		return false, fmt.Errorf("evaluation failed: %s%s", oneLine(err.Error()), indexHint(err, result))
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("evaluated to %v (%s), want a bool", out.Value(), out.Type().TypeName())
	}
	return bool(b), nil
}

// indexHint explains the error of an Argo condition such as `result[0] < 0.05` on a Prometheus result, which
// kubedeploy gives as a number, not a list.
func indexHint(err error, result any) string {
	if _, isNumber := result.(float64); isNumber && strings.Contains(err.Error(), "no such key") {
		return " (result is a number here: write result < 0.05 where Argo writes result[0] < 0.05)"
	}
	return ""
}
