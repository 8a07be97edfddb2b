package safety

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDisplay(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	w := filepath.Join(home, "proj")
	if err := os.MkdirAll(filepath.Join(w, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(home, "link")
	if err := os.Symlink(w, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ cmd, wd, want string }{
		{"cd " + w + " && make", w, "make"},
		{"cd " + w + "/ && make", w, "make"},
		{"cd " + w + "/. && make", w, "make"},
		{"cd " + w + "/sub/.. && make", w, "make"},
		{`cd "` + w + `" && make`, w, "make"},
		{`cd '` + w + `' && make`, w, "make"},
		{"cd . && make", w, "make"},
		{"cd ./ && make", w, "make"},
		{"cd ~/proj && make", w, "make"},
		{"cd $HOME/proj && make", w, "make"},
		{"cd ${HOME}/proj && go test ./...", w, "go test ./..."},
		{"cd -- " + w + " && make", w, "make"},
		{"cd -P " + w + " && make", w, "make"},
		{"cd -x " + w + " && make", w, "cd -x " + w + " && make"},
		{"cd " + link + " && make", w, "make"},
		{"cd ~ && ls", home, "ls"},
		{"cd && ls", home, "ls"},
		{"cd " + w + "; make", w, "make"},
		{"cd " + w + ";make", w, "make"},
		{"cd " + w + "\nmake", w, "make"},
		{"cd " + w + " && make || echo x", w, "make || echo x"},
		{"cd " + w + " && make && make install", w, "make && make install"},
		{"cd " + w + " && make | tee log", w, "make | tee log"},
		{"cd " + w + " && make; echo done", w, "make; echo done"},
		{"cd " + w + " &&   make   -j4  # keep spacing", w, "make   -j4  # keep spacing"},
		{"cd " + w + " && echo \"a  b\"", w, "echo \"a  b\""},
		// unchanged
		{"cd " + w + " || exit 1", w, "cd " + w + " || exit 1"},
		{"cd " + w + " || x && y", w, "cd " + w + " || x && y"},
		{"cd /tmp && make", w, "cd /tmp && make"},
		{"cd .. && make", w, "cd .. && make"},
		{`cd "~/proj" && make`, w, `cd "~/proj" && make`},
		{"cd sub && make", w, "cd sub && make"},
		{"cd $DIR && make", w, "cd $DIR && make"},
		{"cd " + w, w, "cd " + w},
		{"cd " + w + " & make", w, "cd " + w + " & make"},
		{"cd " + w + " | make", w, "cd " + w + " | make"},
		{"cd " + w + " > log && make", w, "cd " + w + " > log && make"},
		{"make && cd " + w, w, "make && cd " + w},
		{"echo cd " + w + " && make", w, "echo cd " + w + " && make"},
		{"cd 'unterminated && make", w, "cd 'unterminated && make"},
		{"ls", w, "ls"},
		{"cd " + w + " && make", "", "cd " + w + " && make"},
	}
	for _, tc := range cases {
		if got := Display(tc.cmd, tc.wd); got != tc.want {
			t.Errorf("Display(%q, %q) = %q, want %q", tc.cmd, tc.wd, got, tc.want)
		}
	}
}
