package safety

import "testing"

// TestDecidableReads: the three guarded asks of the real-agent corpus
// that were reads a grammar can prove (psql --version, msgfmt --version,
// unzip -l) are allowed under guarded and locked; unzip's extracting forms
// still ask (guarded) and are denied (locked).
func TestDecidableReads(t *testing.T) {
	guarded, err := Preset("guarded")
	if err != nil {
		t.Fatal(err)
	}
	locked, err := Preset("locked")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd  string
		read bool
	}{
		{"psql --version", true}, {"msgfmt --version", true},
		{"unzip -l reproduce_issue/build/epub/ReproduceIssue.epub", true}, {"unzip -v a.zip", true},
		{"unzip -tq a.zip", true}, {"unzip -z a.zip", true},
		{"unzip a.zip", false}, {"unzip -o a.zip", false}, {"unzip -l a.zip -d out", false},
		{"unzip -q a.zip", false}, {"psql -c 'drop table x'", false}, {"msgfmt -o x.mo x.po", false},
		{"unzip -l $(cat list)", false},
	} {
		want := map[bool][2]Decision{true: {Allow, Allow}, false: {Ask, Deny}}[tc.read]
		if got := Gate(tc.cmd, guarded).Decision; got != want[0] {
			t.Errorf("guarded %q: %s, want %s", tc.cmd, got, want[0])
		}
		if got := Gate(tc.cmd, locked).Decision; got != want[1] {
			t.Errorf("locked %q: %s, want %s", tc.cmd, got, want[1])
		}
	}
}
