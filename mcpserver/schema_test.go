package mcpserver

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
)

// TestOutputSchemasCoverTheStructs: every JSON field of engine.Result and
// engine.JobInfo, engine.JobOutput, engine.UndoResult and the change report
// is described in the output schemas, and nothing else is.
func TestOutputSchemasCoverTheStructs(t *testing.T) {
	for _, c := range []struct {
		schema string
		typ    reflect.Type
	}{{resultOutputSchema, reflect.TypeFor[engine.Result]()}, {jobInfoSchema, reflect.TypeFor[engine.JobInfo]()},
		{outputOutputSchema, reflect.TypeFor[engine.JobOutput]()}, {undoOutputSchema, reflect.TypeFor[engine.UndoResult]()},
		{changeSchema, reflect.TypeFor[engine.Change]()}, {refusalSchema, reflect.TypeFor[engine.Refusal]()}} {
		var s struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal([]byte(c.schema), &s); err != nil {
			t.Fatal(err)
		}
		fields := map[string]bool{}
		for _, f := range reflect.VisibleFields(c.typ) { // an embedded struct's fields are the JSON object's
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.IsExported() && !f.Anonymous && name != "-" {
				fields[name] = true
				if s.Properties[name] == nil {
					t.Errorf("%s: %s missing from the schema", c.typ, name)
				}
			}
		}
		for name := range s.Properties {
			if !fields[name] {
				t.Errorf("%s: the schema describes %s, which it does not have", c.typ, name)
			}
		}
	}
}
