package safety

// AddCoAuthor is the co-author rewrite alone (Options.CoAuthor), for the
// tests and benchmarks of it.
func AddCoAuthor(command, trailer string) string {
	return addCoAuthor(&source{text: command}, trailer)
}
