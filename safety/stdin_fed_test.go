package safety

import "testing"

// TestStdinFedFileReadAsCode: a job fed later that writes a file from its
// input and runs a program that may read that file as code without being
// given it by name (make and its Makefile, python and a module, git and
// its configuration) asks, whatever the order; the writer alone, and
// plain data filters reading what it wrote, run.
func TestStdinFedFileReadAsCode(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want Decision
	}{
		{"cat > Makefile; make", Ask},
		{"tee Makefile > /dev/null && make -s", Ask},
		{"cat > m.mk; make -f m.mk", Ask},
		{"cat > d/Makefile; make -C d", Ask},
		{"cat > rules.mk; make", Ask}, // the Makefile may include it
		{`while read -r l; do echo "$l" >> Makefile; done; make`, Ask},
		{`f=Makefile; cat > "$f"; gmake`, Ask},
		{"dd of=Makefile; timeout 60 make", Ask},
		{"for i in 1 2; do make; cat > Makefile; done", Ask}, // the second make reads it
		{"cat > x.py; python3 -c 'import x'", Ask},
		{"cat > .gitattributes; git diff", Ask},
		{"cat > conftest.py; pytest -q & wait", Ask},
		{"cat > conftest.py & pytest -q", Allow}, // bash gives a background command /dev/null
		{"{ cat; } > Makefile; make", Ask},
		// runs nothing it wrote
		{"cat > notes.txt", Allow},
		{"cat > notes.txt; wc -l notes.txt; grep x notes.txt", Allow},
		{"python3 app.py > app.log 2>&1", Allow},
		{"make > build.log", Allow},
		{"make", Allow},
		{"cat > /dev/null; make", Allow},
		{"tee /dev/null | make", Allow},
	} {
		o := Analyze(c.cmd, Options{StdinFed: true}).Outcome
		if o.Decision != c.want {
			t.Errorf("%q fed later: %s (%s), want %s", c.cmd, o.Decision, o.Message, c.want)
		}
		// not fed later: nothing sent later to read
		if o := Analyze(c.cmd, Options{}).Outcome; o.Decision != Allow {
			t.Errorf("%q: %s (%s), want allow", c.cmd, o.Decision, o.Message)
		}
	}
}
