package ratelimit

import "testing"

// A parameter's text is what the module makes of the float's exact value:
// six decimals, rounded half up (as Node's toFixed), so that an unnamed
// limit's key is the same from every client. 1/128 = 0.0078125 exactly.
func TestDecimalRoundsHalfUpAsTheModule(t *testing.T) {
	for v, want := range map[float64]string{
		1.0 / 128: "0.007813", 0.5078125: "0.507813", 1.0 / 3: "0.333333", 0.0000015: "0.000002",
		0.000001: "0.000001", 0.1: "0.1", 2.5: "2.5", 60: "60", 86400: "86400", 1e12: "1000000000000",
	} {
		if got := decimal(v); got != want {
			t.Errorf("decimal(%v) = %q, want %q", v, got, want)
		}
	}
}
