//! The plan in force and what applying a new one does.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use partyline_shared::bridge::{BridgeError, Plan, PlanUser};
use partyline_shared::janus::client::Client;
use tokio::sync::Mutex;

use crate::branch;
use crate::card::Available;
use crate::pipeline::Base;
use crate::plan::{Change, diff, validate};
use crate::state::Shared;

#[derive(Debug, Default)]
struct Running {
    plan: Option<Plan>,
    generation: u64,
    base: Option<Arc<Base>>,
    branches: HashMap<String, branch::Handle>,
}

/// bridged's core: applies plans, owns the pipeline and the branches.
#[derive(Debug)]
pub struct Bridge {
    running: Mutex<Running>,
    shared: Arc<Shared>,
    janus: Client,
}

impl Bridge {
    pub fn new(shared: Arc<Shared>, janus: Client) -> Bridge {
        Bridge { running: Mutex::new(Running::default()), shared, janus }
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
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
        let change = diff(running.plan.as_ref(), &plan);
        match change {
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
                self.shared.set_pipeline_error(None);
                if let Some(card) = card {
                    match Base::start(&plan, &card, self.shared.clone()) {
                        Ok(base) => {
                            let base = Arc::new(base);
                            running.base = Some(base.clone());
                            let context = self.context(&plan, base);
                            for user in &plan.users {
                                running
                                    .branches
                                    .insert(user.name.clone(), branch::Handle::start(context.clone(), user.clone()));
                            }
                        }
                        Err(error) => {
                            tracing::error!("{error:#}");
                            self.shared.set_pipeline_error(Some(format!("{error:#}")));
                        }
                    }
                }
                tracing::info!(
                    "plan applied: {} the sound card pipeline ({} in, {} out, {} Hz, {} user(s)) in {} ms",
                    if card_changed { "rebuilt" } else { "restarted" },
                    display_device(&plan.input_device),
                    display_device(&plan.output_device),
                    plan.device_sample_rate,
                    plan.users.len(),
                    started.elapsed().as_millis()
                );
            }
            Change::Branches { added, changed, removed } => {
                let Some(base) = running.base.clone() else {
                    // The card side failed to start: the users wait for a rebuild.
                    return self.finish(&mut running, plan);
                };
                for name in removed.iter().chain(changed.iter().map(|u| &u.name)) {
                    if let Some(handle) = running.branches.remove(name) {
                        handle.stop().await;
                    }
                }
                let context = self.context(&plan, base);
                for user in added.iter().chain(&changed) {
                    running.branches.insert(user.name.clone(), branch::Handle::start(context.clone(), user.clone()));
                }
                tracing::info!(
                    "plan applied: {} added, {} changed, {} removed ({}) in {} ms",
                    added.len(),
                    changed.len(),
                    removed.len(),
                    names(&added, &changed, &removed),
                    started.elapsed().as_millis()
                );
            }
        }
        self.finish(&mut running, plan)
    }

    fn finish(&self, running: &mut Running, plan: Plan) -> Result<u64, BridgeError> {
        running.generation += 1;
        self.shared.set_plan(running.generation, !plan.users.is_empty());
        running.plan = Some(plan);
        Ok(running.generation)
    }

    fn context(&self, plan: &Plan, base: Arc<Base>) -> branch::Context {
        branch::Context {
            base,
            shared: self.shared.clone(),
            janus: self.janus.clone(),
            janus_url: plan.janus_url.clone(),
            ice_addresses: plan.ice_addresses.clone(),
            latency_ms: plan.latency_ms,
        }
    }

    async fn stop_all(&self, running: &mut Running) {
        let branches: Vec<branch::Handle> = running.branches.drain().map(|(_, handle)| handle).collect();
        futures_util::future::join_all(branches.into_iter().map(branch::Handle::stop)).await;
        if let Some(base) = running.base.take() {
            base.stop();
        }
    }

    /// Leaves every room and stops the pipeline (on SIGTERM).
    pub async fn shutdown(&self) {
        let mut running = self.running.lock().await;
        self.stop_all(&mut running).await;
    }
}

fn display_device(device: &str) -> &str {
    if device.is_empty() { "default" } else { device }
}

fn names(added: &[PlanUser], changed: &[PlanUser], removed: &[String]) -> String {
    let all: Vec<&str> = added
        .iter()
        .map(|u| u.name.as_str())
        .chain(changed.iter().map(|u| u.name.as_str()))
        .chain(removed.iter().map(String::as_str))
        .collect();
    all.join(", ")
}
