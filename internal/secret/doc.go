// Package secret decides which environment variables carry credentials
// and keeps their values out of text. [IsSecret] is the name rule the
// engine uses to strip variables from a command's environment and the audit
// log uses to redact assignments; a [Redactor], built from the values that
// were stripped, replaces every occurrence of those values with
// [REDACTED:NAME] — in one string ([Redactor.String]) or in a stream split
// across any number of writes ([Redactor.Writer]). It imports nothing from
// the rest of bashvisor.
package secret
