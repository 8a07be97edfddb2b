// Package cluster runs bashvisor's tool calls on a fleet of executor
// machines: an [Executor] serves one local engine over protoactor remote,
// and a [Client] — an engine.Runner, so mcpserver and the CLI take it in
// place of an *engine.Engine — runs each conversation on one executor and
// forwards its calls there, reporting a call whose executor stopped
// answering as "lost" and never running it again.
//
// # Any front serves any conversation
//
// Where a conversation runs is known to the executors, not to a front,
// so that several fronts (behind a load balancer, or one that restarts)
// serve the same conversations with the same jobs, job ids, files and
// results:
//
//   - The executor that holds a conversation says so when a front asks
//     ("who holds X?"); a front asks every live executor the first time
//     it sees a conversation, then caches the answer. An executor refuses
//     a call or job query for a conversation it does not hold (another
//     front ended it), and the front asks again; nothing ran.
//   - A conversation that runs nowhere is placed by rendezvous hashing of
//     its id over the ready executors' member ids: fronts that see the
//     same executors pick the same one, so two first calls that reach two
//     fronts at once land together. (Should their views differ at that
//     instant, both executors hold it; the one with the higher score wins
//     on every front from then on, and the other's jobs of that instant
//     are left there.) A front waits in its first [ClientOptions.LostAfter]
//     until every executor it knows of answered, so that a front that
//     just started does not place anew a conversation whose executor has
//     not answered it yet.
//   - The front that placed a conversation tells every other live
//     executor where it runs, and answers the first call only once they
//     have kept it; these records tell a front that never saw the
//     conversation that its executor was lost ([ErrConversationLost], or
//     a move when [ClientOptions.SharedDirs]), however soon after that
//     answer the executor dies. An executor that joins
//     later has no records of earlier conversations; one that restarts
//     has none at all.
//   - An end ([Client.EndConversation]) is done only by the front that
//     used the conversation last, so that one front's idle bound or
//     shutdown does not end a conversation another front serves.
//
// There is no store besides the executors: the choice keeps every
// membership (static addresses, etcd, Kubernetes) working the same way,
// and a conversation's state lives and dies with its executor anyway. A
// front's memory is a cache, plus the jobs it saw, which it reports as
// lost when their executor is.
//
// Records and holdings are forgotten when the conversation ends; a
// conversation that no front ends (its last front died) stays, with its
// jobs, until its executor stops. Fronts and executors of a fleet must
// run the same version: an executor refuses the calls of a front that
// does not say where it placed a conversation.
//
// Edge cases are documented at the fields and methods: how a conversation
// is placed and never moved ([Client]), what survives an executor's loss
// ([ClientOptions.SharedDirs]), how a call id is run at most once
// ([Executor]), when an executor fences itself ([ExecutorOptions.FenceAfter],
// [Executor.FenceDone]), how membership is found ([Static], [Provider]) and
// how the fleet authenticates ([ExecutorOptions.Token]).
package cluster
