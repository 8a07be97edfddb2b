package mcpserver

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rate is how fast one principal may create something (sessions, named
// conversations): a token bucket of Burst tokens, refilled at PerSecond.
// The zero Rate takes the default of the field it sets; a negative
// PerSecond means no limit.
type Rate struct {
	PerSecond float64
	Burst     int
}

func (r Rate) orDefault(def Rate) Rate {
	switch {
	case r.PerSecond < 0:
		return Rate{PerSecond: math.Inf(1)}
	case r.PerSecond == 0:
		r.PerSecond = def.PerSecond
	}
	if r.Burst <= 0 {
		r.Burst = def.Burst
	}
	return r
}

// rates is a token bucket per principal.
type rates struct {
	r  Rate
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newRates(r Rate) *rates { return &rates{r: r, m: map[string]*rate.Limiter{}} }

// maxIdleLimiters bounds the buckets kept before full ones (whose
// principal created nothing for a while) are forgotten.
const maxIdleLimiters = 1024

// allow takes a token of principal p's bucket; when there is none it says
// how long until there is.
func (rs *rates) allow(p string) (ok bool, retry time.Duration) {
	if math.IsInf(rs.r.PerSecond, 1) {
		return true, 0
	}
	now := time.Now()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	l := rs.m[p]
	if l == nil {
		if len(rs.m) >= maxIdleLimiters {
			for q, ql := range rs.m {
				if ql.TokensAt(now) >= float64(rs.r.Burst) {
					delete(rs.m, q)
				}
			}
		}
		l = rate.NewLimiter(rate.Limit(rs.r.PerSecond), rs.r.Burst)
		rs.m[p] = l
	}
	res := l.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}
