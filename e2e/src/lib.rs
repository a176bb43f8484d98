//! partyline's whole-stack tests, in `tests/e2e/`: what no one crate holds, so none of them
//! owns it. The real control and bridged binaries, Janus, the headless crew
//! (`partyline-crew`), a sound card on a private sound server and an AES67 network of the
//! tests' own (`partyline-testkit`) together: a tone through the whole stack, faults
//! (a daemon killed, restarted, in any order), the crew in turns and in crowds, the AES67 clocks
//! and streams, a pool of Janus nodes joined by trunks.
//!
//! Every test needs the services tier (`--features services`, root, the network namespace of
//! `scripts/netns-run`) and the workspace's binaries built (`cargo build --workspace --bins`,
//! as `scripts/test` does). The timing-sensitive ones live under `serial::`, which
//! `scripts/test` runs one at a time after the parallel run; the pool's run with the rest. No library code: this file is the
//! crate's description.
