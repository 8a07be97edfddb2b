package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/proc"
)

// checkCgroupOrphans: before Shutdown, the only populated command cgroups
// may be those of background jobs still running: any other holds an
// orphan the engine missed (Shutdown would kill it silently).
func (s *stresser) checkCgroupOrphans() {
	running := 0
	for _, j := range s.e.AllJobs() {
		if j.Status == engine.JobRunning {
			running++
		}
	}
	cgOrphans := populatedCgroups()
	if len(cgOrphans) > running {
		for _, c := range cgOrphans {
			s.fail(-1, "cgroups", fmt.Errorf("populated cgroup %s (%d jobs running)", c, running))
		}
	}
}

// gone checks that the processes whose pids the command wrote to
// dir/pid* are gone, allowing a moment for the kernel.
func (s *stresser) gone(dir string) error {
	deadline := time.Now().Add(3 * time.Second)
	for {
		var live []int
		for _, pid := range recordedPids(dir) {
			if s.ours(pid) {
				live = append(live, pid)
			}
		}
		if len(live) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still alive: %v", live)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func recordedPids(dir string) []int {
	files, _ := filepath.Glob(filepath.Join(dir, "pid*"))
	var pids []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for w := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(w); err == nil && pid > 1 {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// ours reports whether pid is a live (non-zombie) process of this run: it
// carries the run's marker in its environment, so a recycled pid is not
// mistaken for an orphan.
func (s *stresser) ours(pid int) bool {
	st, err := proc.ReadStat(pid)
	if err != nil || st.State == 'Z' || st.State == 'X' {
		return false
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return err == nil && bytes.Contains(env, []byte("BASHVISOR_STRESS="+s.marker+"\x00"))
}

// orphans lists every live process carrying the run's marker (by a scan of
// /proc, which also finds processes no command recorded) and every
// recorded pid still alive.
func (s *stresser) orphans() []string {
	deadline := time.Now().Add(3 * time.Second)
	for {
		var out []string
		seen := map[int]bool{}
		for _, dir := range s.pidFiles {
			for _, pid := range recordedPids(dir) {
				if !seen[pid] && s.ours(pid) {
					seen[pid] = true
					out = append(out, describePid(pid)+" (recorded in "+filepath.Base(dir)+")")
				}
			}
		}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || seen[pid] || pid == os.Getpid() {
				continue
			}
			if s.ours(pid) {
				seen[pid] = true
				out = append(out, describePid(pid))
			}
		}
		if len(out) == 0 || time.Now().After(deadline) {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describePid(pid int) string {
	st, _ := proc.ReadStat(pid)
	return fmt.Sprintf("%s (pid %d, pgid %d, sid %d, ppid %d)", st.Comm, pid, st.Pgrp, st.Session, st.Ppid)
}

// cgroupsOn reports whether the engine runs commands in cgroups.
func cgroupsOn(o stressOpts) bool {
	if o.noCgroups {
		return false
	}
	m, err := proc.ProbeCgroups("")
	if err != nil {
		return false
	}
	return m.Close() == nil
}

// cgroupsLeft lists cgroup directories this process's engines left behind.
func cgroupsLeft() []string {
	m, err := proc.ProbeCgroups("")
	if err != nil {
		return nil
	}
	dirs := m.Dirs() // the cgroup v2 and v1 hierarchies the engines use
	_ = m.Close()
	var left []string
	for _, d := range dirs {
		l, _ := filepath.Glob(filepath.Join(filepath.Dir(d), "bashvisor-"+strconv.Itoa(os.Getpid())+"-*"))
		left = append(left, l...)
	}
	return left
}

// fdTargets maps this process's open fds to what they point at.
func fdTargets() map[string]string {
	ents, _ := os.ReadDir("/proc/self/fd")
	m := make(map[string]string, len(ents))
	for _, e := range ents {
		m[e.Name()], _ = os.Readlink("/proc/self/fd/" + e.Name())
	}
	return m
}

// populatedCgroups lists this process's command cgroups that still hold a
// process.
func populatedCgroups() []string {
	m, err := proc.ProbeCgroups("")
	if err != nil {
		return nil
	}
	parent := filepath.Dir(m.Dir())
	_ = m.Close()
	events, _ := filepath.Glob(filepath.Join(parent, "bashvisor-"+strconv.Itoa(os.Getpid())+"-*", "*", "cgroup.events"))
	var out []string
	for _, f := range events {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte("populated 1")) {
			out = append(out, filepath.Dir(f))
		}
	}
	return out
}

// openFDs counts this process's open file descriptors.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents) - 1 // the directory being read
}

// isolation checks that command i's started job r is out of reach of
// every other conversation: the next tenant lists none of it and reaches
// only its own job by r's id (ids count per conversation, so it may have
// one), and a conversation without jobs gets "no such job" for it from
// Job, JobOutput and Kill.
func (s *stresser) isolation(i int, r engine.Result) error {
	own, other := s.tenant(i), s.tenant(i+1)
	if other != own {
		tc := engine.ToolContext{ConversationID: other}
		for _, j := range s.e.Jobs(tc) {
			if j.PID == r.PID || j.ConversationID != other {
				return fmt.Errorf("isolation: %s lists %s's job %s (pid %d) as %+v", other, own, r.JobID, r.PID, j)
			}
		}
		if j, err := s.e.Job(tc, r.JobID); err == nil && (j.PID == r.PID || j.ConversationID != other) {
			return fmt.Errorf("isolation: %s reaches %s's job %s: %+v", other, own, r.JobID, j)
		} else if err != nil && !errors.Is(err, engine.ErrNoSuchJob) {
			return fmt.Errorf("isolation: %s: %w", other, err)
		}
		if out, err := s.e.JobOutput(tc, r.JobID, 64, 0, 0); err == nil && (out.Job.PID == r.PID || out.Job.ConversationID != other) {
			return fmt.Errorf("isolation: %s reads %s's job %s: %+v", other, own, r.JobID, out.Job)
		}
	}
	tc := engine.ToolContext{ConversationID: outsider}
	if jobs := s.e.Jobs(tc); len(jobs) != 0 {
		return fmt.Errorf("isolation: a conversation without jobs lists %+v", jobs)
	}
	_, errJob := s.e.Job(tc, r.JobID)
	_, errOut := s.e.JobOutput(tc, r.JobID, 0, 0, 0)
	_, errKill := s.e.Kill(context.Background(), tc, r.JobID)
	for _, err := range []error{errJob, errOut, errKill} {
		if !errors.Is(err, engine.ErrNoSuchJob) {
			return fmt.Errorf("isolation: %s's job %s from another conversation: %v, want no such job", own, r.JobID, err)
		}
	}
	s.isolated.Add(1)
	return nil
}

// checkTenants checks, after the mix, that each conversation lists exactly
// its own jobs.
func (s *stresser) checkTenants() {
	byConv := map[string]int{}
	for _, j := range s.e.AllJobs() {
		byConv[j.ConversationID]++
	}
	total := 0
	for k := range s.o.tenants {
		conv := s.tenant(k)
		jobs := s.e.Jobs(engine.ToolContext{ConversationID: conv})
		for _, j := range jobs {
			if j.ConversationID != conv {
				s.fail(-1, "isolation", fmt.Errorf("%s lists %s's job %s", conv, j.ConversationID, j.JobID))
			}
		}
		if len(jobs) != byConv[conv] {
			s.fail(-1, "isolation", fmt.Errorf("%s lists %d jobs, the engine holds %d of it", conv, len(jobs), byConv[conv]))
		}
		total += byConv[conv]
	}
	if all := len(s.e.AllJobs()); total != all {
		s.fail(-1, "isolation", fmt.Errorf("%d jobs belong to no tenant", all-total))
	}
}

// endTenant ends conversation conv, as an MCP server does when a session
// closes: its running jobs (those left for shutdown) end, it lists nothing
// more, and the other conversations' running jobs are untouched.
func (s *stresser) endTenant(conv string) {
	var pids []int
	others := 0
	for _, j := range s.e.AllJobs() {
		switch {
		case j.Status != engine.JobRunning:
		case j.ConversationID == conv:
			pids = append(pids, j.PID)
		default:
			others++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.e.EndConversation(ctx, conv); err != nil {
		s.fail(-1, "end-conversation", err)
		return
	}
	if jobs := s.e.Jobs(engine.ToolContext{ConversationID: conv}); len(jobs) != 0 {
		s.fail(-1, "end-conversation", fmt.Errorf("%s still lists %d jobs", conv, len(jobs)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for s.ours(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if s.ours(pid) {
			s.fail(-1, "end-conversation", fmt.Errorf("%s's job pid %d alive after the conversation ended", conv, pid))
		}
	}
	still := 0
	for _, j := range s.e.AllJobs() {
		if j.Status == engine.JobRunning {
			still++
		}
	}
	if still != others {
		s.fail(-1, "end-conversation", fmt.Errorf("ending %s left %d of the other conversations' %d running jobs running", conv, still, others))
	}
}
