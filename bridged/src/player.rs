//! The player: the plan in force, and what applying a new one does (the card side and each
//! group's participant started, swapped or stopped).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use partyline_shared::bridge::{BridgeError, Plan};
use partyline_shared::janus::client::Client;
use tokio::sync::Mutex;

use crate::aes67::Network;
use crate::card::Available;
use crate::card_mix::Matrix;
use crate::card_side::CardSide;
use crate::feed::Feed;
use crate::mix::Routing;
use crate::participant;
use crate::plan::{Change, diff, validate};
use crate::rooms_host::RoomsHost;
use crate::state::StatusBoard;

#[derive(Debug, Default)]
struct Running {
    plan: Option<Plan>,
    generation: u64,
    card_side: Option<CardSide>,
    /// The AES67 media network, while `audio.aes67.interface` is set (with or without an AES67
    /// direction of the card: the admin picks streams from its SAP list first).
    network: Option<Arc<Network>>,
    /// By room: each group's participant and its feed.
    participants: HashMap<String, (participant::Handle, Arc<Feed>)>,
}

/// bridged's core: applies plans, owns the card side and the group participants.
#[derive(Debug)]
pub struct Player {
    running: Mutex<Running>,
    board: Arc<StatusBoard>,
    janus: Client,
    rtp: Arc<participant::RtpPort>,
    /// partyline's own rooms, when this bridged hosts them.
    rooms: Option<RoomsHost>,
}

impl Player {
    pub fn new(board: Arc<StatusBoard>, janus: Client, rooms: Option<RoomsHost>) -> anyhow::Result<Player> {
        let rtp = Arc::new(participant::RtpPort::open()?);
        Ok(Player { running: Mutex::new(Running::default()), board, janus, rtp, rooms })
    }

    pub fn board(&self) -> &Arc<StatusBoard> {
        &self.board
    }

    /// Validates `plan`, applies its difference from the plan in force, returns its generation.
    /// On error nothing changed.
    pub async fn apply(&self, plan: Plan) -> Result<u64, BridgeError> {
        validate(&plan).map_err(|e| {
            tracing::warn!("plan refused: {e}");
            BridgeError::InvalidPlan(e)
        })?;
        let mut running = self.running.lock().await;
        let started = Instant::now();
        match diff(running.plan.as_ref(), &plan) {
            Change::Nothing => return Ok(running.generation),
            Change::Rebuild => {
                let old = running.plan.as_ref();
                let card_changed = old.is_none_or(|old| {
                    (&old.input_device, &old.output_device) != (&plan.input_device, &plan.output_device)
                });
                let card = if plan.users.is_empty() {
                    None
                } else {
                    // Ask the sound server before tearing anything down.
                    let probed = plan.clone();
                    let available = tokio::task::spawn_blocking(move || Available::probe(&probed))
                        .await
                        .map_err(|e| BridgeError::UnknownDevice(format!("device probe failed: {e}")))?;
                    let card = available.choose(&plan).map_err(|e| {
                        tracing::warn!("plan refused: {e}");
                        BridgeError::UnknownDevice(e)
                    })?;
                    Some(card)
                };
                self.stop_all(&mut running).await;
                self.board.set_pipeline_error(None);
                self.follow_network(&mut running, &plan);
                if let Some(card) = card {
                    let feeds: HashMap<String, Arc<Feed>> = plan
                        .groups
                        .iter()
                        .map(|g| {
                            (g.room.clone(), Arc::new(Feed::new(&g.room, plan.device_sample_rate, plan.transport)))
                        })
                        .collect();
                    let network = running.network.as_ref();
                    match CardSide::start(&plan, &card, network, self.board.clone(), matrix(&plan, &feeds)) {
                        Ok(card_side) => {
                            running.card_side = Some(card_side);
                            let context = self.context(&plan);
                            for group in &plan.groups {
                                let feed = feeds[&group.room].clone();
                                feed.set_muted(group.muted);
                                let handle = participant::Handle::start(context.clone(), group.clone(), feed.clone());
                                running.participants.insert(group.room.clone(), (handle, feed));
                            }
                        }
                        Err(error) => {
                            tracing::error!("{error:#}");
                            self.board.set_pipeline_error(Some(format!("{error:#}")));
                        }
                    }
                }
                tracing::info!(
                    "plan applied: {} the sound card pipeline ({} in, {} out, {} Hz, {} user(s) in {} group(s)) in {} ms",
                    if card_changed { "rebuilt" } else { "restarted" },
                    display_device(&plan.input_device),
                    display_device(&plan.output_device),
                    plan.device_sample_rate,
                    plan.users.len(),
                    plan.groups.len(),
                    started.elapsed().as_millis()
                );
            }
            Change::Participants { added, changed, removed } => {
                if running.card_side.is_none() {
                    // The card side failed to start: the users wait for a rebuild.
                    return self.finish(&mut running, plan);
                }
                for room in removed.iter().chain(changed.iter().map(|g| &g.room)) {
                    if let Some((handle, _)) = running.participants.remove(room) {
                        handle.stop().await;
                    }
                }
                let context = self.context(&plan);
                for group in added.iter().chain(&changed) {
                    let feed = Arc::new(Feed::new(&group.room, plan.device_sample_rate, plan.transport));
                    let handle = participant::Handle::start(context.clone(), group.clone(), feed.clone());
                    running.participants.insert(group.room.clone(), (handle, feed));
                }
                for group in &plan.groups {
                    if let Some((handle, feed)) = running.participants.get(&group.room) {
                        handle.rename(&group.display);
                        feed.set_muted(group.muted);
                    }
                }
                let feeds: HashMap<String, Arc<Feed>> =
                    running.participants.iter().map(|(room, (_, feed))| (room.clone(), feed.clone())).collect();
                if let Some(card_side) = &running.card_side {
                    card_side.set_matrix(matrix(&plan, &feeds));
                }
                tracing::info!(
                    "plan applied: {} user(s) in {} group(s); rooms joined {}, rejoined {}, left {} in {} ms",
                    plan.users.len(),
                    plan.groups.len(),
                    rooms(&added),
                    rooms(&changed),
                    if removed.is_empty() { "none".to_owned() } else { removed.join(", ") },
                    started.elapsed().as_millis()
                );
            }
        }
        self.finish(&mut running, plan)
    }

    /// Starts, keeps or stops the AES67 media network for `plan`. A network that does not start
    /// is logged; a card direction on AES67 then reports it.
    fn follow_network(&self, running: &mut Running, plan: &Plan) {
        let wanted = !plan.aes67.interface.is_empty();
        if let Some(network) = running.network.as_ref().filter(|n| wanted && n.is(&plan.aes67)) {
            network.allow(&plan.aes67);
            return;
        }
        if let Some(network) = running.network.take() {
            network.stop();
        }
        if wanted {
            match Network::start(&plan.aes67, self.board.clone()) {
                Ok(network) => running.network = Some(Arc::new(network)),
                Err(error) => tracing::error!("AES67: {error:#}"),
            }
        }
    }

    fn finish(&self, running: &mut Running, plan: Plan) -> Result<u64, BridgeError> {
        running.generation += 1;
        self.board.set_plan(running.generation, &plan.users);
        running.plan = Some(plan);
        Ok(running.generation)
    }

    fn context(&self, plan: &Plan) -> participant::Context {
        participant::Context {
            rate: plan.device_sample_rate,
            board: self.board.clone(),
            janus: self.janus.clone(),
            janus_url: plan.janus_url.clone(),
            transport: plan.transport,
            ice_addresses: plan.ice_addresses.clone(),
            jitter_buffer_ms: plan.jitter_buffer_ms,
            rtp: self.rtp.clone(),
            rooms: self.rooms.clone(),
        }
    }

    async fn stop_all(&self, running: &mut Running) {
        let participants: Vec<participant::Handle> =
            running.participants.drain().map(|(_, (handle, _))| handle).collect();
        futures_util::future::join_all(participants.into_iter().map(participant::Handle::stop)).await;
        if let Some(card_side) = running.card_side.take() {
            card_side.stop().await;
        }
    }

    /// Leaves every room and stops the pipeline (on SIGTERM).
    pub async fn shutdown(&self) {
        let mut running = self.running.lock().await;
        self.stop_all(&mut running).await;
        if let Some(network) = running.network.take() {
            network.stop();
        }
    }
}

/// The matrix of `plan` over `feeds` (one per group of the plan).
fn matrix(plan: &Plan, feeds: &HashMap<String, Arc<Feed>>) -> Matrix {
    Matrix { routing: Routing::new(plan), feeds: plan.groups.iter().map(|g| feeds[&g.room].clone()).collect() }
}

fn display_device(device: &str) -> &str {
    if device.is_empty() { "default" } else { device }
}

fn rooms(groups: &[partyline_shared::bridge::PlanGroup]) -> String {
    if groups.is_empty() {
        return "none".to_owned();
    }
    groups.iter().map(|g| g.room.as_str()).collect::<Vec<_>>().join(", ")
}
