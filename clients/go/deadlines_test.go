package ratelimit

import (
	"context"
	"testing"
	"time"
)

type valueKey struct{}

// A call's context: the request's values, a deadline never later than the
// check's and at most a millisecond earlier, shared within the millisecond;
// a request's own earlier deadline as it is.
func TestWithin(t *testing.T) {
	var d deadlines
	request := context.WithValue(context.Background(), valueKey{}, "v")
	at := time.Now().Add(50 * time.Millisecond)
	ctx, got := d.within(request, at)
	if own, _ := ctx.Deadline(); got.After(at) || at.Sub(got) >= time.Millisecond || !own.Equal(got) || ctx.Value(valueKey{}) != "v" {
		t.Fatalf("deadline %v for %v, value %v", got, at, ctx.Value(valueKey{}))
	}
	same, _ := d.within(request, got.Add(time.Millisecond-1))
	if same.Done() != ctx.Done() {
		t.Fatal("the same millisecond has a timer of its own")
	}
	select {
	case <-ctx.Done():
		t.Fatal("done before its deadline")
	default:
	}
	<-ctx.Done()
	if late := time.Since(got); late < 0 || ctx.Err() != context.DeadlineExceeded {
		t.Fatalf("done %s after its deadline: %v", late, ctx.Err())
	}
	earlier, cancel := context.WithTimeout(request, 10*time.Millisecond)
	defer cancel()
	if own, _ := d.within(earlier, time.Now().Add(time.Second)); own != earlier {
		t.Fatal("an earlier deadline of the request's was replaced")
	}
}
