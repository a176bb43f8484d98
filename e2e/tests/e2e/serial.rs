//! The timing-sensitive tests, declared here so that nothing has to name them: the audio path
//! and the whole-stack faults measure gaps of tens of milliseconds and a 3 s recovery, the
//! headless crew judges every listener's gaps with up to 40 members on the box, and the AES67
//! suites time a network's clocks and streams. `scripts/test` runs every test under `serial::`
//! after the rest, one at a time, so that the hundreds of parallel API tests (and each other) do
//! not starve the media pipeline; those under `serial::alone::` last, with nothing beside them.

mod alone;
mod audio_path;
pub(crate) mod crew;
mod faults;
