package supervisor

import (
	"fmt"
	"testing"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/actors"
)

// BenchmarkAdmissionDecision: deciding whether a call may start costs the
// same however many principals and conversations the engine serves (the
// share is kept up to date, never recounted).
func BenchmarkAdmissionDecision(b *testing.B) {
	for _, n := range []int{1, 100, 10000} {
		b.Run(fmt.Sprintf("principals=%d", n), func(b *testing.B) {
			sv := &supervisor{s: &Supervisor{admission: config.Admission{}.WithDefaults(), res: &actors.Resources{}}, convs: map[string]*conversation{},
				shares: shares{principals: map[pkey]*principal{}}}
			var pk pkey
			var p *principal
			var c *conversation
			for i := range n {
				pk = pkey{name: fmt.Sprint("p", i)}
				p, c = sv.principal(pk), sv.conv(fmt.Sprint("p", i, "/c"))
				e := &entry{p: pk, starting: true}
				sv.charge(e, c, p, +1)
				p.ref(c, +1)
				p.running++
				c.running++
				sv.fg++
			}
			b.ResetTimer()
			for b.Loop() {
				sv.held(pk, p, c, sv.share(p))
			}
		})
	}
}
