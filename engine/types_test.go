package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
)

// TestUsageAndChangeSetJSON: Result and JobInfo share their usage and
// change blocks (embedded), and their JSON keeps those fields flat, in
// the place and with the names the API has always had (the golden
// strings are what the fields marshalled to before they were embedded).
func TestUsageAndChangeSetJSON(t *testing.T) {
	u := engine.Usage{CPUMS: 7, PeakMemoryBytes: 1 << 20, Processes: 3, OOMKilled: true}
	cs := engine.ChangeSet{
		Changes:        []engine.Change{{Path: "a.go", Kind: "M", Size: 12}},
		ChangesOmitted: 2,
		Refused:        []engine.Refusal{{Path: ".git/config", Rule: "git-config", Reason: "r"}},
	}
	r := engine.Result{Status: engine.StatusOK, Output: "x", Command: "c", Display: "c", Usage: u, ChangeSet: cs}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	const wantResult = `{"status":"ok","output":"x","truncated":false,"output_bytes":0,"duration_ms":0,"queued_ms":0,"command":"c","display":"c",` +
		`"cpu_ms":7,"peak_memory_bytes":1048576,"processes":3,"oom_killed":true,` +
		`"changes":[{"path":"a.go","kind":"M","size":12}],"changes_omitted":2,"refused":[{"path":".git/config","rule":"git-config","reason":"r"}]}`
	if string(b) != wantResult {
		t.Errorf("Result JSON\n got %s\nwant %s", b, wantResult)
	}
	j := engine.JobInfo{JobID: "job-1", Status: engine.JobRunning, Usage: u, ChangeSet: cs}
	if b, err = json.Marshal(j); err != nil {
		t.Fatal(err)
	}
	const wantJob = `{"job_id":"job-1","pid":0,"command":"","display":"","status":"running","started":"0001-01-01T00:00:00Z","bytes":0,"output_file":"",` +
		`"cpu_ms":7,"peak_memory_bytes":1048576,"processes":3,"oom_killed":true,` +
		`"changes":[{"path":"a.go","kind":"M","size":12}],"changes_omitted":2,"refused":[{"path":".git/config","rule":"git-config","reason":"r"}]}`
	if string(b) != wantJob {
		t.Errorf("JobInfo JSON\n got %s\nwant %s", b, wantJob)
	}
	var back engine.Result
	if err := json.Unmarshal([]byte(wantResult), &back); err != nil || back.CPUMS != 7 || back.ChangesOmitted != 2 || len(back.Refused) != 1 {
		t.Errorf("decoded %+v, %v", back, err)
	}
}
