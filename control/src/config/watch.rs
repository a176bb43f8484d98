//! Reloads the config when it is edited by hand: on SIGHUP, and when the file changes (a watch
//! on its directory, since editors and our own writer replace the file by renaming).

use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::ConfigManager;

/// Editors write in several steps; wait for the file to settle before reading it.
const SETTLE: Duration = Duration::from_millis(150);

/// Runs until the process ends. Our own writes also wake it up; they reload to an identical
/// config, which changes nothing.
pub async fn watch_for_reloads(manager: Arc<ConfigManager>) -> anyhow::Result<()> {
    let (wake, mut woken) = mpsc::channel::<()>(1);
    let _watcher = watch_file(&manager, wake.clone())
        .inspect_err(|e| tracing::warn!(error = %e, "cannot watch the config file; SIGHUP still reloads it"))
        .ok();
    let mut hangup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the config");
            let _ = wake.try_send(());
        }
    });
    while woken.recv().await.is_some() {
        tokio::time::sleep(SETTLE).await;
        while woken.try_recv().is_ok() {}
        let manager = Arc::clone(&manager);
        match tokio::task::spawn_blocking(move || manager.reload()).await? {
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "config reload refused; the running config stays in force"),
        }
    }
    Ok(())
}

fn watch_file(manager: &ConfigManager, wake: mpsc::Sender<()>) -> notify::Result<notify::RecommendedWatcher> {
    let path = std::path::absolute(manager.path())?;
    let dir = path.parent().map(ToOwned::to_owned).unwrap_or_default();
    let name = path.file_name().map(ToOwned::to_owned);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        let ours = event.paths.iter().any(|p| p.file_name() == name.as_deref());
        if ours && (event.kind.is_create() || event.kind.is_modify()) {
            // A full channel already means "reload soon".
            let _ = wake.try_send(());
        }
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    Ok(watcher)
}
