package builtins

import (
	"github.com/cairn-db/cairn/sql/pgerror"
	"github.com/cairn-db/cairn/sql/types"
	"github.com/jackc/pgerrcode"
)

// SettingsAccess is what current_setting and set_config need of the
// session: its run-time parameters (SHOW and SET as functions). The
// session's EvalContext implements it; a context that does not (such as
// FixedContext) makes both functions fail with 55000.
type SettingsAccess interface {
	// Setting returns a parameter's value as SHOW prints it. An unknown
	// name is 42704, unless missingOK, which returns ok false instead.
	Setting(name string, missingOK bool) (value string, ok bool, err error)
	// SetSetting sets a parameter as SET (or, when local, SET LOCAL) does,
	// or resets it to its default (RESET), and returns its new value as
	// SHOW prints it.
	SetSetting(name, value string, reset, local bool) (string, error)
}

func settingsOf(ctx EvalContext) (SettingsAccess, error) {
	if sa, ok := ctx.(SettingsAccess); ok {
		return sa, nil
	}
	return nil, pgerror.New(pgerrcode.ObjectNotInPrerequisiteState, "run-time parameters are not available in this context")
}

func init() {
	currentSetting := func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
		sa, err := settingsOf(ctx)
		if err != nil {
			return nil, err
		}
		missingOK := len(a) > 1 && bool(a[1].(types.DBool))
		v, ok, err := sa.Setting(string(a[0].(types.DString)), missingOK)
		if err != nil {
			return nil, err
		}
		if !ok {
			return types.DNull, nil
		}
		return types.DString(v), nil
	}
	registerFn("current_setting",
		Overload{Args: []*types.T{types.Text}, Return: Fixed(types.Text), Strict: true, Volatility: Stable, Fn: currentSetting},
		Overload{Args: []*types.T{types.Text, types.Bool}, Return: Fixed(types.Text), Strict: true, Volatility: Stable, Fn: currentSetting})
	// set_config is not strict in Postgres: a NULL name is an error, a NULL
	// value resets the parameter, a NULL is_local means false.
	registerFn("set_config", Overload{Args: []*types.T{types.Text, types.Text, types.Bool}, Return: Fixed(types.Text), Volatility: Volatile,
		Fn: func(ctx EvalContext, a []types.Datum) (types.Datum, error) {
			if types.IsNull(a[0]) {
				return nil, pgerror.New(pgerrcode.InvalidParameterValue, "SET requires parameter name")
			}
			sa, err := settingsOf(ctx)
			if err != nil {
				return nil, err
			}
			value, reset := "", types.IsNull(a[1])
			if !reset {
				value = string(a[1].(types.DString))
			}
			local := !types.IsNull(a[2]) && bool(a[2].(types.DBool))
			v, err := sa.SetSetting(string(a[0].(types.DString)), value, reset, local)
			if err != nil {
				return nil, err
			}
			return types.DString(v), nil
		}})
}
