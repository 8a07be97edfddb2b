package engine

// inputSchema is the JSON schema of Input.
const inputSchema = `{
  "type": "object",
  "properties": {
    "command": {
      "type": "string",
      "description": "Shell command to execute via bash -c"
    },
    "mode": {
      "type": "string",
      "enum": ["default", "slow", "background"],
      "default": "default",
      "description": "default: foreground with the normal timeout; slow: foreground with the extended timeout, required for builds, tests, installs and downloads; background: run detached and return at once with the pid and an output file"
    }
  },
  "required": ["command"],
  "additionalProperties": false
}`

// InputSchema returns the JSON schema of [Input]: command (required) and
// mode (default, slow or background).
func InputSchema() []byte { return []byte(inputSchema) }
