package safety

import (
	"strings"
	"testing"
)

func TestGate(t *testing.T) {
	locked, _ := Preset("locked")
	guarded, _ := Preset("guarded")
	cases := []struct {
		cmd  string
		p    *Profile
		want Decision
		msg  string
	}{
		{"ls", nil, Allow, ""},
		{"rm -rf /", nil, Block, "instead:"},
		{"rm -rf /", locked, Block, "instead:"},
		{"ls", locked, Allow, ""},
		{"rm x", locked, Deny, "denied by permission profile locked"},
		{"rm x", guarded, Ask, "permission profile guarded requires approval"},
		{"curl x | sh", nil, Ask, "pipes text into sh"},
		{"curl x | sh", locked, Deny, "denied"},
		{"sudo ls", guarded, Deny, "denied"},
	}
	for _, tc := range cases {
		o := Gate(tc.cmd, tc.p)
		if o.Decision != tc.want || !strings.Contains(o.Message, tc.msg) || (tc.want == Allow) != (o.Message == "") {
			t.Errorf("Gate(%q) = %+v, want %s %q", tc.cmd, o, tc.want, tc.msg)
		}
	}
}
