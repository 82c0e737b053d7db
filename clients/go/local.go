package ratelimit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/local"
)

// OnUnavailable Local: while Redis cannot answer, the Local limits are
// decided in process by internal/local (the module's math, answering what
// RL.MULTI would), each limit's capacity and rate, or window limit, or
// slots, divided among Instances processes. Its state starts empty and is
// never written to Redis; a lease taken in process is released there.

type inProcess = *local.Limiter

func newInProcess() inProcess { return local.New(0) }

// decideLocally decides over charges in process, each divided among the instances.
func (c *core) decideLocally(charges []charge) (*Decision, error) {
	shares := make([]charge, len(charges))
	keys := make([]string, len(charges))
	specs := make([]local.Spec, len(charges))
	for i, ch := range charges {
		share := *ch.policy
		if share.isBucket() {
			share.paramText = dividedRate(share.paramText, c.instance)
			share.param, _ = strconv.ParseFloat(share.paramText, 64)
		}
		ch.policy = &share
		ch.size = max(1, ch.size/c.instance)
		shares[i], keys[i] = ch, ch.key
		specs[i] = local.Spec{Algorithm: string(ch.algorithm), Size: ch.size, Param: ch.paramText, N: ch.cost}
	}
	reply, err := c.local.Multi(keys, time.Now().UnixMicro(), specs)
	if err != nil {
		return nil, err
	}
	limits := make([]LimitDecision, len(shares))
	for i := range shares {
		fields := make([]any, len(reply.Limits[i]))
		for j, f := range reply.Limits[i] {
			fields[j] = f
		}
		if limits[i], err = limitResult(&shares[i], fields, command("local")); err != nil {
			return nil, err
		}
	}
	outcome := OutcomeUnavailableLocalDenied
	if reply.Allowed {
		outcome = OutcomeUnavailableLocalAllowed
	}
	d := decisionOf(shares, limits, reply.Allowed, outcome)
	d.local = true
	return d, nil
}

// dividedRate is rate / instances, rounded down to six decimals, at least 0.000001.
func dividedRate(rate string, instances int64) string {
	whole, fraction, _ := strings.Cut(rate, ".")
	micros, _ := strconv.ParseInt(whole+(fraction + "000000")[:6], 10, 64)
	micros = max(1, micros/instances)
	text := strings.TrimRight(fmt.Sprintf("%d.%06d", micros/1e6, micros%1e6), "0")
	return strings.TrimSuffix(text, ".")
}

func (c *core) releaseLocally(d *Decision, held []int) {
	for _, i := range held {
		if _, err := c.local.Release(d.Limits[i].Key, d.Limits[i].LeaseID, time.Now().UnixMicro()); err != nil {
			c.logger.Warn(fmt.Sprintf("rate limiter release failed: %v", err))
		}
	}
}

func (c *core) renewLocally(d *Decision, held []int) (bool, error) {
	all := true
	for _, i := range held {
		reply, err := c.local.Renew(d.Limits[i].Key, d.Limits[i].LeaseID, d.charges[i].paramText, time.Now().UnixMicro())
		if err != nil {
			return false, err
		}
		all = all && reply[0] == 1
	}
	return all, nil
}
