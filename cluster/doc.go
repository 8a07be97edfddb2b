// Package cluster runs bashvisor's tool calls on a fleet of executor
// machines: an [Executor] serves one local engine over protoactor remote,
// and a [Client] — an engine.Runner, so mcpserver and the CLI take it in
// place of an *engine.Engine — pins each conversation to one executor and
// forwards its calls there, reporting a call whose executor stopped
// answering as "lost" and never running it again.
//
// Edge cases are documented at the fields and methods: how a conversation
// is placed and never moved ([Client]), what survives an executor's loss
// ([Placement.DirSurvives]), how a call id is run at most once
// ([Executor]), when an executor fences itself ([ExecutorOptions.FenceAfter],
// [Executor.Fence]), how membership is found ([Static], [Provider]) and
// how the fleet authenticates ([ExecutorOptions.Token]).
package cluster
