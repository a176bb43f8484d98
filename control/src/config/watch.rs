//! Reloads the config when it is edited by hand: on SIGHUP, and when the file changes (a watch
//! on its directory, since editors and our own writer replace the file by renaming).

use std::sync::Arc;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, ModifyKind};
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::ConfigManager;

/// An in-place write announces itself by modify events and ends when its writer closes the
/// file; when no close is seen (an editor that keeps the file open), reload this long after the
/// last write.
const SETTLE: Duration = Duration::from_millis(150);

/// What woke the reloader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// The file is complete: renamed into place, closed after writing, or SIGHUP.
    Now,
    /// The file is being written in place.
    Settle,
}

/// Runs until the process ends. Our own writes also wake it up; they reload to an identical
/// config, which changes nothing.
pub async fn watch_for_reloads(manager: Arc<ConfigManager>) -> anyhow::Result<()> {
    let (wake, mut woken) = mpsc::channel::<Wake>(16);
    let _watcher = watch_file(&manager, wake.clone())
        .inspect_err(|e| tracing::warn!(error = %e, "cannot watch the config file; SIGHUP still reloads it"))
        .ok();
    let mut hangup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the config");
            let _ = wake.send(Wake::Now).await;
        }
    });
    while let Some(mut why) = woken.recv().await {
        let deadline = tokio::time::Instant::now() + SETTLE;
        while why == Wake::Settle {
            match tokio::time::timeout_at(deadline, woken.recv()).await {
                Ok(Some(next)) => why = next,
                Ok(None) => return Ok(()),
                Err(_elapsed) => break,
            }
        }
        while woken.try_recv().is_ok() {}
        let manager = Arc::clone(&manager);
        match tokio::task::spawn_blocking(move || manager.reload()).await? {
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "config reload refused; the running config stays in force"),
        }
    }
    Ok(())
}

fn watch_file(manager: &ConfigManager, wake: mpsc::Sender<Wake>) -> notify::Result<notify::RecommendedWatcher> {
    let path = std::path::absolute(manager.path())?;
    let dir = path.parent().map(ToOwned::to_owned).unwrap_or_default();
    let name = path.file_name().map(ToOwned::to_owned);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if !event.paths.iter().any(|p| p.file_name() == name.as_deref()) {
            return;
        }
        let why = match event.kind {
            EventKind::Create(_)
            | EventKind::Modify(ModifyKind::Name(_))
            | EventKind::Access(AccessKind::Close(AccessMode::Write)) => Wake::Now,
            EventKind::Modify(_) => Wake::Settle,
            _ => return,
        };
        // A full channel already means "reload soon".
        let _ = wake.try_send(why);
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    Ok(watcher)
}
