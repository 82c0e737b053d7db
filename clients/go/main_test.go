package ratelimit_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test leaves no goroutine behind: a closed limiter has none.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
