package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Main() // restricted runs re-execute this binary as the sandbox helper
	goleak.VerifyTestMain(m)
}
