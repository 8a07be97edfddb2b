package safety

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The stdin gate. A job started with a stdin pipe or a terminal
// (Options.StdinFed) takes input sent after the analysis; a program that
// reads that input may treat it as code (a shell, a REPL, awk -f -, an
// editor's :!cmd). The gate is an allow-list: a program that reads the
// job's input asks unless it is known to treat what it reads as data
// (cat, grep, read, jq, a y/N prompt of git or npm), or its arguments make
// it so (a shell or interpreter given its program as a file or as -c
// text, awk given its program, a program of the workspace named by a
// relative path). On a terminal, pagers and editors with shell escapes
// (less, man, vi, nano) ask too; through a pipe the pagers only copy.
//
// Scripts named -, /dev/stdin, /dev/fd/N or /proc/self/fd/N are code read
// from stdin for any program, and a program that reads code from a pipe of
// unknown text asks whatever the job's stdin is (pipe-to-shell).
//
// What reads the input is judged with its arguments, not by its name:
// xargs and parallel fed later pass the input to their program as
// arguments, so they ask unless that program takes only data (argsAreData:
// never env or another wrapper, an interpreter, awk, sed, git, find, sort,
// printf or test); a tool told to read the input as a file (git -c
// include.path=/dev/stdin, java /dev/stdin) or an argument read from it
// (read -r l; git $l) asks; a file written from it and run in the same
// command (cat > s.sh; bash s.sh) asks; an interpreter's -c/-e
// text that reads stdin and evaluates asks; package runners (npx, npm
// exec, uvx, ...) are judged by the program they run; and a value read
// with read or mapfile asks where bash evaluates it (see rules_arith.go).

// dataReaders are programs that treat what they read from stdin as data
// (or read nothing from it), whatever their arguments.
var dataReaders = setOf(
	// text and data filters
	"cat", "tac", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "ag", "sort", "uniq", "cut", "tr",
	"tee", "paste", "join", "fold", "fmt", "nl", "od", "xxd", "hexdump", "base64", "base32", "basenc",
	"md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum", "sum",
	"gzip", "gunzip", "zcat", "bzip2", "bunzip2", "bzcat", "xz", "unxz", "xzcat", "zstd", "unzstd", "lz4",
	"jq", "yq", "column", "expand", "unexpand", "rev", "strings", "iconv", "dos2unix", "unix2dos", "diff",
	"cmp", "comm", "split", "csplit", "pv", "sponge", "ts", "file", "look", "tsort", "factor", "numfmt",
	"shuf", "pr", "dd",
	// shell builtins and commands that read no code
	"read", "mapfile", "readarray", "echo", "printf", "true", "false", ":", "test", "[", "[[", "sleep",
	"wait", "yes", "seq", "date", "pwd", "ls", "stat", "touch", "mkdir", "rmdir", "cp", "mv", "ln", "rm",
	"chmod", "chown", "export", "unset", "cd", "pushd", "popd", "dirs", "let", "local", "declare",
	"typeset", "shift", "set", "exit", "return", "break", "continue", "kill", "trap", "umask", "ulimit",
	"type", "which", "hash", "getopts", "basename", "dirname", "realpath", "readlink", "id", "whoami",
	"uname", "hostname", "env", "printenv", "du", "df", "free", "ps", "clear", "tput", "stty", "tty",
	"mktemp", "install", "truncate", "sync",
	// tools whose prompts take answers, not code (their editor and pager
	// are /bin/false and cat in the engine's environment)
	"git", "go", "gofmt", "cargo", "rustc", "npm", "yarn", "pnpm", "pip", "pip3", "uv", "poetry",
	"curl", "wget", "ssh-keygen", "gpg", "openssl", "npx", "ssh-add", "nc", "ncat", "patch", "unzip",
	"apt-get", "apt", "cmake", "ninja", "gcc", "cc", "clang", "javac", "java", "mvn", "gradle", "tsc",
	// builders, linters and test runners that read no code from stdin (a
	// test runner's debugger is excluded by replShell)
	"pytest", "py.test", "tox", "nox", "sphinx-build", "sphinx-quickstart", "sphinx-apidoc", "pylint",
	"pyreverse", "flake8", "mypy", "ruff", "black", "isort", "msgfmt", "dot", "jest", "eslint", "prettier",
	"django-admin", "flask", "rails", "rake",
)

// promptTool reports whether name is one of the data readers above that read no code from stdin
// itself but may be told to read a file of configuration, scripts or
// commands: given the job's input as that file (git -c
// include.path=/dev/stdin, java /dev/stdin, gdb -x /dev/stdin, curl -K
// -) they run what is sent later.
func promptTool(name string) bool {
	switch name {
	case "git", "go", "gofmt", "cargo", "rustc", "npm", "yarn", "pnpm", "pip", "pip3", "uv", "poetry",
		"curl", "wget", "ssh-keygen", "gpg", "openssl", "npx", "ssh-add", "nc", "ncat", "patch", "unzip", "apt-get",
		"apt", "cmake", "ninja", "gcc", "cc", "clang", "javac", "java", "mvn", "gradle", "tsc", "pytest", "py.test",
		"tox", "nox", "sphinx-build", "sphinx-quickstart", "sphinx-apidoc", "pylint", "pyreverse", "flake8", "mypy",
		"ruff", "black", "isort", "msgfmt", "dot", "jest", "eslint", "prettier", "django-admin", "flask", "rails",
		"rake", "env", "gdb", "lldb":
		return true
	}
	return false
}

// stdinPathArg reports whether a word names the standard input as a file,
// alone or as an option's value (-x /dev/stdin, include.path=/dev/stdin,
// --config=-, -K -).
func stdinPathArg(args []field) bool {
	for i, f := range args[1:] {
		s := f.s
		if _, v, ok := strings.Cut(s, "="); ok {
			s = v
		}
		if s == "-" && (i == 0 || !strings.HasPrefix(args[i].s, "-")) {
			continue // a lone - operand: most tools read it as data
		}
		if isStdinPath(s) {
			return true
		}
	}
	return false
}

// replShell reports whether a data reader's arguments start a REPL or a
// debugger that reads code from stdin: pytest --pdb (or -s, which lets
// breakpoint() read it), django-admin/manage.py shell, flask shell, rails
// console.
func replShell(name string, args []field) bool {
	switch name {
	case "pytest", "py.test":
		for _, f := range args[1:] {
			switch f.s {
			case "-s", "--pdb", "--trace", "--capture=no":
				return true
			}
		}
		return optValue(args, "pdbcls") != ""
	}
	for _, f := range operands(args) {
		switch f.s {
		case "shell", "dbshell", "console", "c", "repl", "debug":
			return true
		}
		if !strings.HasSuffix(f.s, ".py") {
			break // only the subcommand, or the script's first operand (manage.py shell)
		}
	}
	return false
}

// optValue returns the value of --name=VALUE in args, or "".
func optValue(args []field, name string) string {
	for _, f := range args[1:] {
		if v, ok := strings.CutPrefix(f.s, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// ownStdinRule are programs whose rules judge the code they read from
// stdin themselves.
var ownStdinRule = setOf("source", ".", "eval", "su", "runuser")

// ttyEscapes are pagers and viewers that run commands typed on their
// terminal (less's !cmd, man through its pager, info, browsers' shell
// escapes); through a pipe they only copy their input.
var ttyEscapes = setOf("less", "more", "most", "man", "info", "pinfo", "w3m", "lynx", "links", "elinks", "pg")

// codeReaders are programs that run code they read from stdin unless
// their arguments give them that code (a script file, -c/-e text): REPLs,
// editors, debuggers, database shells with shell escapes. The function
// reports whether args leave stdin as the code. Shells and the
// interpreters of package-level interpreters have their own rules.
var codeReaders = map[string]func(args []field) bool{
	"awk":     awkReadsStdin,
	"gawk":    awkReadsStdin,
	"mawk":    awkReadsStdin,
	"nawk":    awkReadsStdin,
	"sed":     func(args []field) bool { return optFile(args, "f", "file") },
	"make":    func(args []field) bool { return optFile(args, "f", "file", "makefile") },
	"gmake":   func(args []field) bool { return optFile(args, "f", "file", "makefile") },
	"tclsh":   noScript,
	"wish":    noScript,
	"expect":  func(args []field) bool { return noScript(args) && !hasOpt(args, "c") },
	"lua":     func(args []field) bool { return noScript(args) && !hasOpt(args, "e") || hasOpt(args, "i") },
	"luajit":  func(args []field) bool { return noScript(args) && !hasOpt(args, "e") || hasOpt(args, "i") },
	"guile":   func(args []field) bool { return noScript(args) && !hasOpt(args, "c") },
	"racket":  func(args []field) bool { return noScript(args) && !hasOpt(args, "e") || hasOpt(args, "i") },
	"sbcl":    func(args []field) bool { return !hasOpt(args, "script") },
	"clisp":   noScript,
	"ghci":    always,
	"irb":     always,
	"pry":     always,
	"jshell":  noScript,
	"R":       func(args []field) bool { return !hasOpt(args, "f", "file", "e") },
	"julia":   func(args []field) bool { return noScript(args) && !hasOpt(args, "e", "eval") || hasOpt(args, "i") },
	"octave":  func(args []field) bool { return noScript(args) && !hasOpt(args, "eval") },
	"gnuplot": func(args []field) bool { return noScript(args) && !hasOpt(args, "e") },
	"dc":      func(args []field) bool { return noScript(args) && !hasOpt(args, "e", "expression") },
	"m4":      noScript,
	"sqlite3": func(args []field) bool { return len(operands(args)) < 2 && !hasOpt(args, "cmd") },
	"psql":    func(args []field) bool { return !hasOpt(args, "c", "command", "f", "file", "l", "list") },
	"mysql":   func(args []field) bool { return !hasOpt(args, "e", "execute") },
	"mariadb": func(args []field) bool { return !hasOpt(args, "e", "execute") },
	"gdb":     func(args []field) bool { return !hasOpt(args, "batch") },
	"lldb":    func(args []field) bool { return !hasOpt(args, "batch") },
	"pdb":     always,
	"ed":      always,
	"red":     always,
	"ex":      always,
	"vi":      always,
	"vim":     always,
	"nvim":    always,
	"view":    always,
	"vimdiff": always,
	"gvim":    always,
	"emacs":   func(args []field) bool { return !hasOpt(args, "batch", "script") },
	"nano":    always,
	"pico":    always,
	"joe":     always,
	"mc":      always,
	"ftp":     always,
	"sftp":    func(args []field) bool { return !hasOpt(args, "b") || optFile(args, "b") },
	"lftp":    func(args []field) bool { return !hasOpt(args, "c", "f") },
	"telnet":  always,
	"tmux":    always,
	"screen":  always,
	"ssh":     sshReadsStdin,
	"script":  func(args []field) bool { return !hasOpt(args, "c", "command") },
}

func always([]field) bool { return true }

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// operands returns the words of args[1:] that are not options (a word
// after an option is taken as an operand: this errs towards finding a
// script, which only matters for telling a REPL from a script run).
func operands(args []field) []field {
	var out []field
	for i := 1; i < len(args); i++ {
		a := args[i].s
		if a == "--" {
			return append(out, args[i+1:]...)
		}
		if len(a) > 1 && a[0] == '-' {
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// noScript reports whether args name no script file: the program then
// reads its code from stdin (a script named - or /dev/stdin counts as
// none).
func noScript(args []field) bool {
	ops := operands(args)
	return len(ops) == 0 || isStdinPath(ops[0].s)
}

// hasOpt reports whether args have one of the options names: -N (also in a
// cluster of one-letter options) or --N, also with =VALUE.
func hasOpt(args []field, names ...string) bool {
	for _, f := range args[1:] {
		a := f.s
		if a == "--" {
			return false
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		n, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		for _, want := range names {
			if n == want || len(want) == 1 && a[1] != '-' && strings.Contains(n, want) {
				return true
			}
		}
	}
	return false
}

// optFile reports whether one of the file options names (-f FILE,
// --file=FILE) names stdin: -, /dev/stdin, /dev/fd/0 ...
func optFile(args []field, names ...string) bool {
	for i := 1; i < len(args); i++ {
		a := args[i].s
		if a == "--" {
			return false
		}
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		n, v, eq := strings.Cut(strings.TrimLeft(a, "-"), "=")
		for _, want := range names {
			switch {
			case n == want && eq:
				if isStdinPath(v) {
					return true
				}
			case n == want && i+1 < len(args):
				if isStdinPath(args[i+1].s) {
					return true
				}
			case len(want) == 1 && a[1] != '-' && strings.HasPrefix(n, want) && len(n) > 1:
				if isStdinPath(n[1:]) { // -f-
					return true
				}
			}
		}
	}
	return false
}

// awkReadsStdin: awk -f - (or /dev/stdin) reads its program from stdin.
func awkReadsStdin(args []field) bool {
	return optFile(args, "f", "file")
}

// sshReadsStdin: ssh HOST with no remote command runs a shell that reads
// stdin.
func sshReadsStdin(args []field) bool {
	return len(operands(args)) < 2 && !hasOpt(args, "N", "W")
}

// isStdinPath reports whether a script path names the standard input:
// -, /dev/stdin, /dev/fd/N, /proc/self/fd/N (any N: a descriptor the job
// set up from its input).
func isStdinPath(s string) bool {
	if s == "-" || s == "/dev/stdin" {
		return true
	}
	for _, p := range []string{"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"} {
		if n, ok := strings.CutPrefix(s, p); ok && n != "" && isDigits(n) {
			return true
		}
	}
	return false
}

// Files written from the job's input: a command reading the input sent
// later that writes a file (cat > s.sh, tee s.sh, dd of=s.sh) makes that
// file code nobody has seen, and running it later in the same command
// (bash s.sh, . ./s.sh, ./s.sh) asks as running the input would. The
// names must be literal for that message; any file written from the
// input, by any name, makes every other program of the command that is
// not a plain data filter ask (see fedRun: make reads a Makefile without
// being given it).

// fedRedirs records the files a statement reading the input sent later
// writes by redirection.
func (c *checker) fedRedirs(rs []*syntax.Redirect) {
	for _, r := range rs {
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.RdrAllClob, syntax.AppAllClob:
			if t, ok := c.wordLit(r.Word); ok {
				c.markFed(t)
			}
		}
	}
}

// fedArgs records the files tee and dd write from the input sent later.
func (c *checker) fedArgs(args []field) {
	switch base(args[0].s) {
	case "tee":
		for _, f := range args[1:] {
			if !strings.HasPrefix(f.s, "-") {
				c.markFed(f.s)
			}
		}
	case "dd":
		for _, f := range args[1:] {
			if v, ok := strings.CutPrefix(f.s, "of="); ok {
				c.markFed(v)
			}
		}
	}
}

func (c *checker) markFed(path string) {
	if c.fedFiles == nil {
		c.fedFiles = make(map[string]bool, 2)
	}
	c.fedFiles[cleanPath(path)] = true
}

// fedFile reports whether f names a file written from the input sent
// later.
func (c *checker) fedFile(f field) bool {
	return !f.dyn && len(c.fedFiles) > 0 && c.fedFiles[cleanPath(f.s)]
}

// askFedFile is the verdict on running a file written from the input.
func askFedFile(path string) Verdict {
	return Verdict{Decision: Ask, Rule: "stdin-program",
		Reason:      "runs " + path + ", a file written from the job's input sent later: code nobody has seen",
		Alternative: "write the script in the command (a heredoc), or run it in a separate step after reading it"}
}

// taintedArg reports whether an argument holds a value read at run time
// (read, mapfile).
func taintedArg(args []field) bool {
	for _, f := range args[1:] {
		if f.taint {
			return true
		}
	}
	return false
}

// stdinGate checks a program that reads stdin in: code read from a pipe
// of unknown text asks (pipe-to-shell), and a program reading the job's
// input sent later asks unless it is a known data reader.
func (c *checker) stdinGate(name string, args []field, in stdinSrc) {
	if !in.piped || infoQuery(args) {
		return
	}
	reads := codeReaders[name]
	switch {
	case reads != nil && reads(args):
		c.report(askFed(name, in))
	case !in.later:
	case promptTool(name) && stdinPathArg(args):
		c.report(Verdict{Decision: Ask, Rule: "stdin-program",
			Reason:      name + " is given the job's input as a file (" + "/dev/stdin or the like" + "), where it may read configuration or code sent later",
			Alternative: "give it a file written in the command, or its input in a heredoc"})
	case promptTool(name) && taintedArg(args):
		c.report(Verdict{Decision: Ask, Rule: "stdin-program",
			Reason:      name + " is given a value read at run time from the job's input as an argument, where an option (git -c alias.x=!cmd, -c core.fsmonitor=cmd) runs code sent later",
			Alternative: "write the arguments out in the command, or check the value first in a separate step"})
	case c.terminal && ttyEscapes[name]:
		c.report(Verdict{Decision: Ask, Rule: "stdin-tty",
			Reason:      name + " runs commands typed on its terminal (shell escapes such as !cmd), and the job's terminal takes input sent later",
			Alternative: "run it without a terminal (stdin pipe or none; pagers then copy their input), or read the file with cat, head or sed -n"})
	case !c.dataReader(name, args):
		c.report(Verdict{Decision: Ask, Rule: "stdin-program",
			Reason:      name + " reads input sent later (stdin pipe or tty) and is not known to treat it only as data, so it may run code nobody has seen",
			Alternative: "give it its input in the command (a heredoc, a file with < FILE), or start a program known to read data (cat, read, grep, a script file run by its interpreter)"})
	}
}

// infoQuery reports whether a program is only asked for its version or
// usage (python3 --version, psql -V): it prints that and exits.
func infoQuery(args []field) bool {
	if len(args) != 2 {
		return false
	}
	switch args[1].s {
	case "--version", "-version", "-V", "--help", "-help", "-h":
		return true
	}
	return false
}

// dataReader reports whether a program reading the job's input treats it
// as data: a known data reader, a code reader given its code, a shell or
// interpreter (their rules judge the code they read), a pager through a
// pipe, or a program of the workspace named by a relative path.
func (c *checker) dataReader(name string, args []field) bool {
	p := args[0].s
	switch {
	case (dataReaders[name] || shells[name] || interpreters[name] || strings.HasPrefix(name, "python")) && replShell(name, args):
		return false
	case dataReaders[name], codeReaders[name] != nil, shells[name], interpreters[name],
		strings.HasPrefix(name, "python"), ttyEscapes[name], ownStdinRule[name]:
		return true
	case name == "docker" || name == "podman" || name == "nerdctl" || name == "kubectl":
		return !hasOpt(args, "i", "interactive") // no -i: the container gets no stdin
	case name == "xargs" || name == "parallel" || name == "find":
		return true // the commands they run are checked with their stdin
	}
	if strings.Contains(p, dynMark) || !strings.Contains(p, "/") {
		return false
	}
	if strings.HasPrefix(p, "/") {
		return c.workDir != "" && c.workDir != "/" && strings.HasPrefix(cleanPath(p), cleanPath(c.workDir)+"/")
	}
	return !strings.HasPrefix(p, homeMark)
}

// startsShell reports whether a wrapper given no command (see unwrapOne)
// starts an interactive shell instead: script without -c, chroot DIR,
// unshare, firejail, sudo -s/-i, doas -s, systemd-run --shell.
func startsShell(args []field) bool {
	switch name := base(args[0].s); name {
	case "script":
		return !hasOpt(args, "c", "command")
	case "chroot", "unshare", "firejail":
		return true
	case "sudo":
		return hasOpt(args, "s", "i", "shell", "login")
	case "doas":
		return hasOpt(args, "s")
	case "systemd-run":
		return hasOpt(args, "S", "shell")
	}
	return false
}

// maxXargsRuns bounds the command lines xargs -I is checked with.
const maxXargsRuns = 16

// xargs checks xargs OPTS CMD... when its input is static text (a heredoc,
// echo ... |): CMD is checked with the words xargs would give it. It
// reports whether it did; otherwise CMD gets arguments only known at run
// time.
func (c *checker) xargs(opts, cmd []field, in stdinSrc) bool {
	if !in.isDoc || in.dyn {
		return false
	}
	replace, sep, ok := xargsOptions(opts)
	if !ok {
		return false
	}
	if replace == "" {
		words := xargsWords(in.code, sep)
		if len(words) > maxArray {
			return false
		}
		argv := append([]field(nil), cmd...)
		for _, w := range words {
			argv = append(argv, field{s: w, word: -1})
		}
		c.argv(argv, stdinSrc{})
		return true
	}
	lines := strings.Split(strings.TrimSuffix(in.code, "\n"), "\n")
	if len(lines) > maxXargsRuns {
		return false
	}
	for _, line := range lines {
		line = strings.TrimLeft(line, " \t")
		if line == "" {
			continue
		}
		argv := make([]field, len(cmd))
		for i, f := range cmd {
			f.s = strings.ReplaceAll(f.s, replace, line)
			argv[i] = f
		}
		c.argv(argv, stdinSrc{})
	}
	return true
}

// xargsOptions reads xargs's options: the replace string of -I R / -i /
// --replace, and whether items are separated by NUL (-0) or newlines (-d
// '\n'); ok is false for a delimiter it does not model.
func xargsOptions(opts []field) (replace string, sep byte, ok bool) {
	for i := 1; i < len(opts); i++ {
		a := opts[i].s
		switch {
		case a == "-I" && i+1 < len(opts):
			replace = opts[i+1].s
			i++
		case strings.HasPrefix(a, "-I"):
			replace = a[2:]
		case a == "-i" || a == "--replace":
			replace = "{}"
		case strings.HasPrefix(a, "-i") || strings.HasPrefix(a, "--replace="):
			replace = a[strings.IndexAny(a, "i=")+1:]
		case a == "-0" || a == "--null":
			sep = 0
			ok = true
			continue
		case a == "-d" || a == "--delimiter" || strings.HasPrefix(a, "-d") || strings.HasPrefix(a, "--delimiter="):
			d := strings.TrimPrefix(strings.TrimPrefix(a, "--delimiter="), "-d")
			if (a == "-d" || a == "--delimiter") && i+1 < len(opts) {
				d = opts[i+1].s
				i++
			}
			if d != `\n` && d != "\n" {
				return "", 0, false
			}
			sep = '\n'
		}
	}
	if sep == 0 && !ok {
		sep = ' '
	}
	return replace, sep, true
}

// xargsWords splits xargs's input into items: at NULs, at newlines, or at
// blanks and newlines with quotes and backslashes as xargs reads them.
func xargsWords(s string, sep byte) []string {
	if sep != ' ' {
		return strings.FieldsFunc(s, func(r rune) bool { return r == rune(sep) })
	}
	var out []string
	var b strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0 && ch == quote:
			quote = 0
		case quote != 0:
			b.WriteByte(ch)
		case ch == '\'' || ch == '"':
			quote, in = ch, true
		case ch == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
			in = true
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				out = append(out, b.String())
				b.Reset()
				in = false
			}
		default:
			b.WriteByte(ch)
			in = true
		}
	}
	if in {
		out = append(out, b.String())
	}
	return out
}

// A file written from the job's input may be read as code by a program
// that is not given it by name: make reads a Makefile (and what it
// includes), python imports a module of its directory, git reads its
// configuration and hooks, a test runner its conftest.py. So once a
// command fed later writes a file from that input (a redirection of a
// statement that may read it, tee, dd: any name, also one only known at
// run time), every other program it runs, before or after (a loop or a
// background job may run it later), asks unless it is a plain data filter
// (pureData). The writer itself may run: python3 app.py > log writes what
// it read, but runs nothing from log.

// maxFedRunners bounds the programs fedRun remembers.
const maxFedRunners = 64

// fedRun records, in a command fed later, the simple commands that write
// a file from the input and those that run a program other than a plain
// data filter.
type fedRun struct {
	on      bool                      // the command is fed later (Options.StdinFed)
	wrote   bool                      // some statement writes a file from the input
	writers map[*syntax.CallExpr]bool // the simple commands that do
	runners []fedRunner               // programs run that may read such a file as code
	more    bool                      // more than maxFedRunners of them
}

type fedRunner struct {
	call *syntax.CallExpr
	name string
}

// redirs records that statement s, which may read the input sent later,
// writes a file by redirection (not /dev/null, /dev/stdout, /dev/stderr
// or a descriptor).
func (f *fedRun) redirs(s *syntax.Stmt) {
	if !f.on {
		return
	}
	var r resolver
	for _, rd := range s.Redirs {
		switch rd.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.RdrAllClob, syntax.AppAllClob:
			if t, ok := r.wordLit(rd.Word); ok && (t == "/dev/null" || t == "/dev/stdout" || t == "/dev/stderr") {
				continue
			}
			f.writer(s.Cmd)
		}
	}
}

// args records that a simple command reading the input sent later writes
// files named by its arguments (tee FILE, dd of=FILE).
func (f *fedRun) args(x *syntax.CallExpr, argv []field) {
	switch base(argv[0].s) {
	case "tee":
		for _, a := range argv[1:] {
			if a.dyn || !strings.HasPrefix(a.s, "-") && a.s != "/dev/null" {
				f.writer(x)
			}
		}
	case "dd":
		for _, a := range argv[1:] {
			if a.dyn || strings.HasPrefix(a.s, "of=") && a.s != "of=/dev/null" {
				f.writer(x)
			}
		}
	}
}

// writer records a command that writes a file from the input sent later;
// a compound command's redirection writes what any command in it prints.
func (f *fedRun) writer(cmd syntax.Command) {
	f.wrote = true
	if x, ok := cmd.(*syntax.CallExpr); ok {
		if f.writers == nil {
			f.writers = make(map[*syntax.CallExpr]bool, 2)
		}
		f.writers[x] = true
	}
}

// ran records the program of simple command x unless it is a plain data
// filter.
func (f *fedRun) ran(x *syntax.CallExpr, prog field) {
	if !prog.dyn && pureData(base(prog.s)) {
		return
	}
	if len(f.runners) == maxFedRunners {
		f.more = true
		return
	}
	f.runners = append(f.runners, fedRunner{x, prog.s})
}

// verdict asks when a program other than the writer may read a file
// written from the input sent later as code.
func (f *fedRun) verdict() Verdict {
	if !f.wrote {
		return Verdict{}
	}
	name := ""
	for _, r := range f.runners {
		if !f.writers[r.call] {
			name = r.name
			break
		}
	}
	if name == "" && f.more {
		name = "a program"
	}
	if name == "" {
		return Verdict{}
	}
	return Verdict{Decision: Ask, Rule: "stdin-program",
		Reason: "the job writes a file from its input sent later, and " + name +
			" may read it as code (a Makefile, a module, a configuration) without being given it by name",
		Alternative: "write files in a separate job from the one that builds or runs them, or give the file's content in the command (a heredoc)"}
}

// pureData reports whether name is a plain data filter: a data reader
// that reads no configuration, script or makefile of its own (unlike git,
// make, npm or a test runner) and is no shell or interpreter.
func pureData(name string) bool {
	return dataReaders[name] && !promptTool(name)
}
