// Package safety analyses the text of a shell command before bashvisor
// runs it. The safety rules, the display form, the co-author rewrite of git
// commits, the permission profile's decision and the redaction of secrets
// for logs are all analyses of the same text, parsed once as bash with
// mvdan.cc/sh/v3/syntax: Analyze gives them all from one parse, and Check,
// Display, Gate, AddCoAuthor, Profile.Evaluate and RedactSecrets give one
// each. Nothing here executes the command.
//
// The safety rules (see Check) guard against mistakes and against the
// obvious forms of prompt injection; they are not a security boundary: a
// determined program can always compute a destructive command at run time.
// Restricted mode (package sandbox) is the boundary.
package safety
