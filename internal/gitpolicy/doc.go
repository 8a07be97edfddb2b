// Package gitpolicy decides which changes of a sandboxed command may
// reach the real workspace, so that nothing the command leaves behind
// makes git run a program later, outside the sandbox (when the user's
// shell prompt or editor runs git status), or points git at files the
// command chose. It judges a change set ([layer.Set]) as a whole,
// before and after the command, instead of protecting a list of paths
// that exist when the command starts: what matters is what the tree
// holds afterwards.
//
// # Git directories
//
// A git directory is found by content, in the tree before or after the
// command, at any depth below the layer's roots: a directory named .git
// (or a name git reads as .git on some file system), or one that git's
// discovery would take for one — HEAD, and commondir, or objects and
// refs. That covers a working tree's .git, bare repositories (also
// ones planted in a working tree: git uses them when the user cds
// there), submodules' git directories below modules/, linked worktrees'
// admin directories below worktrees/, and directories that only become
// git directories in this command.
//
// A change is judged by the innermost git directory around it that
// existed before the command. Inside it, only git's data may change:
// objects (but not objects/info/alternates), refs, reftable, logs, the
// index and its lock and split files, HEAD and the other state files
// (ORIG_HEAD, FETCH_HEAD, MERGE_*, CHERRY_PICK_HEAD, BISECT_*,
// COMMIT_EDITMSG, any X_HEAD pseudo-ref, packed-refs, shallow,
// description, gc.*, info/refs), the states of rebase, am and the sequencer
// (without exec lines or a foreign merge strategy), hooks/*.sample
// (git never runs them), and lock files of all these. Everything else
// is refused with the rule that names it: config and config.worktree
// ([Config]), hooks ([Hooks]), commondir ([Commondir]), gitdir
// ([Gitdir]), modules/ ([Modules]), worktrees/ admin files
// ([Worktrees]), info/ ([Info]), alternates ([Alternates]), symlinks
// ([Symlink]), the removal of the repository, its HEAD, objects or
// refs ([Structure]), and anything git does not write ([Unknown]) —
// creations, changes and removals alike (a config rewritten with the
// same bytes is no change).
//
// A git directory that is new (not one before the command) is checked
// whole, as it is afterwards, not only what the command changed: it
// may hold only what git init and git clone make — the same data, a
// config with known-safe keys and values only (parsed with git's
// syntax; [NewConfig] lists what is refused), hooks/*.sample,
// info/exclude with comments only, empty hooks/, info/ and branches/
// directories. If anything in it is refused, every change in it is,
// so it does not become a repository in the real tree; where it sits
// is then judged by the git directory around it (a new one below
// modules/ or worktrees/ is refused there). So git init, git clone of
// a local or remote repository, commits, branches, stashes, merges and
// rebases work in the sandbox, while the two attacks of the 2026-11-24
// review fail: a commondir pointing at a planted config is refused as
// a commondir; a nested repository whose config sets core.fsmonitor is
// refused as a new config, so registering it as a submodule
// (.gitmodules and a gitlink, both data) runs nothing.
//
// In working trees (outside every git directory) the rules are: a
// .git that is not a directory — a "gitdir:" file or a symlink — may
// not be created, changed or removed ([GitFile]); no entry may be
// named what git reads as .git elsewhere ([DotGit]); a .gitmodules
// must parse and have no update = !command, URL that reads as an option
// or names a transport helper, or name or path that leaves the tree
// ([Gitmodules]); a directory that holds a repository may not be
// removed or replaced ([Structure]). Working-tree files git reads but that run nothing
// without config (.gitattributes, .gitignore, .mailmap) are data.
//
// Not covered: files that other tools run (Makefiles, package.json
// scripts, .envrc, editor settings) are the project's code, which the
// user reviews like any change; the change report names them.
package gitpolicy
