//! The talk keys of a remote-controlled panel: a line's, and the announce key (every talk
//! line at once). A talk a surface holds on is released when the surface goes silent.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;

use super::{RemoteLine, RemotePanel, SwitchRequest, apply, line_of, panel_of, panel_view, remote_line, unknown_key};
use crate::api::{ApiError, ApiJson, ApiPath, AppState, ErrorBody};
use crate::panels::{Command, Push, Switch, TalkState};
use crate::users::{Line, User};

/// Work a line's talk key, as if pressed on the panel. `on` holds it (released after
/// `crew.maxRemoteTalkSeconds` without a request from the surface; a key already on stays as it
/// is), `toggle` latches it or lets it go, `off` lets it go. Answers once the panel applied it.
#[utoipa::path(post, path = "/api/panel/{key}/lines/{group}/talk", operation_id = "panel_talk", tag = "panel", request_body = SwitchRequest,
    params(("key" = String, Path, description = "The panel key"), ("group" = String, Path, description = "The line's group id")),
    responses((status = 200, description = "The line as the panel applied it", body = RemoteLine),
        (status = 400, body = ErrorBody),
        (status = 404, description = "Unknown key or line", body = ErrorBody),
        (status = 409, description = "Refused: `muted_by_admin`, `line_muted`, `cannot_talk` (a listen-only line), `panel_offline`", body = ErrorBody),
        (status = 504, description = "The panel did not apply it in time (`panel_not_responding`)", body = ErrorBody)))]
pub async fn talk(
    State(state): State<AppState>,
    ApiPath((key, group)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<SwitchRequest>,
) -> Result<Json<RemoteLine>, ApiError> {
    let user = panel_of(&state, &key)?;
    talk_on(&state, &user, &group, body.state).await
}

/// Works `user`'s talk key on its line `group` (`switch`), answering once its panel applied it.
pub(super) async fn talk_on(
    state: &AppState,
    user: &User,
    group: &str,
    switch: Switch,
) -> Result<Json<RemoteLine>, ApiError> {
    let line = line_of(user, group)?;
    if !line.talk {
        let message = format!("the line {group:?} has no talk key on this panel");
        return Err(ApiError::Refused { code: "cannot_talk", message });
    }
    let current = state.panels.reported(&user.identity).into_iter().find(|r| r.group_id == group).map(|r| r.talk);
    let turns_on = match switch {
        Switch::On => true,
        Switch::Off => false,
        Switch::Toggle => current.unwrap_or_default() == TalkState::Off,
    };
    if turns_on {
        refuse_talk(state, line)?;
    }
    apply(state, user, Command { talk: Some(switch), ..Command::new(group) }).await?;
    let answer = remote_line(state, user, group)?;
    hold_if_remote(state, user, group, answer.talk);
    Ok(answer)
}

/// A talk the surface holds on (`remote`) is watched, and let go when the surface goes silent.
fn hold_if_remote(state: &AppState, user: &User, group: &str, talk: TalkState) {
    if talk == TalkState::Remote && state.panels.hold(&user.identity, group) {
        tokio::spawn(release_when_silent(state.clone(), user.identity.clone(), group.to_owned()));
    }
}

/// Work the panel's announce key (its position's `announce`), as if pressed on the panel: every
/// talk line the admin does not hold talks (`on` holds them, as a line's `on`), or every one
/// stops (`off`); `toggle` stops them when all of them talk and latches the silent ones otherwise. Answers
/// the panel once it applied every line.
#[utoipa::path(post, path = "/api/panel/{key}/announce", operation_id = "panel_announce", tag = "panel", request_body = SwitchRequest,
    params(("key" = String, Path, description = "The panel key")),
    responses((status = 200, description = "The panel as it applied it", body = RemotePanel),
        (status = 400, body = ErrorBody), (status = 404, description = "Unknown key", body = ErrorBody),
        (status = 409, description = "Refused: `cannot_announce` (no announce key), `muted_by_admin` (every talk line held by the admin), `panel_offline`", body = ErrorBody),
        (status = 504, description = "The panel did not apply it in time (`panel_not_responding`)", body = ErrorBody)))]
pub async fn announce(
    State(state): State<AppState>,
    ApiPath(key): ApiPath<String>,
    ApiJson(body): ApiJson<SwitchRequest>,
) -> Result<Json<RemotePanel>, ApiError> {
    let user = panel_of(&state, &key)?;
    if !user.announce {
        let message = "the panel has no announce key (its position's `announce`)".to_owned();
        return Err(ApiError::Refused { code: "cannot_announce", message });
    }
    let lines: Vec<&Line> = announce_lines(&state, &user).collect();
    let before = panel_view(&state, &user);
    // A toggle that starts the announce latches the silent lines, as each one's own toggle would.
    let (turns_on, switch) = match body.state {
        Switch::On => (true, Switch::On),
        Switch::Off => (false, Switch::Off),
        Switch::Toggle if before.announcing => (false, Switch::Off),
        Switch::Toggle => (true, Switch::Toggle),
    };
    if turns_on && lines.is_empty() {
        let message = "every talk line of the panel is muted by the admin: announce refused".to_owned();
        return Err(ApiError::Refused { code: "muted_by_admin", message });
    }
    let talking = |group: &str| before.lines.iter().any(|l| l.group_id == group && l.talk != TalkState::Off);
    for line in lines.iter().filter(|l| talking(&l.group_id) != turns_on) {
        apply(&state, &user, Command { talk: Some(switch), ..Command::new(&line.group_id) }).await?;
    }
    let now = state.users.get(&user.identity).ok_or_else(unknown_key)?;
    let panel = panel_view(&state, &now);
    for line in panel.lines.iter().filter(|l| lines.iter().any(|a| a.group_id == l.group_id)) {
        hold_if_remote(&state, &user, &line.group_id, line.talk);
    }
    Ok(Json(panel))
}

/// The lines an announce talks on: every talk line the admin does not hold.
pub(super) fn announce_lines<'a>(state: &'a AppState, user: &'a User) -> impl Iterator<Item = &'a Line> {
    user.lines.iter().filter(|l| l.talk && refuse_talk(state, l).is_ok())
}

/// Why a talk on `line` is refused, if it is.
fn refuse_talk(state: &AppState, line: &Line) -> Result<(), ApiError> {
    if line.muted_by_admin {
        let message = format!("muted by the admin on {:?}: talk refused until the admin releases it", line.group_id);
        return Err(ApiError::Refused { code: "muted_by_admin", message });
    }
    if state.janus.line_muted(&line.group_id) {
        let message = format!("the admin muted the line {:?}: talk refused until the admin releases it", line.group_id);
        return Err(ApiError::Refused { code: "line_muted", message });
    }
    Ok(())
}

/// Lets a talk held on by a surface go once the surface has been silent for
/// `crew.maxRemoteTalkSeconds`: the panel is told (it shows why) and the participant is
/// muted in the room whatever the panel does, so a crashed surface cannot leave a live mic.
async fn release_when_silent(state: AppState, identity: String, group: String) {
    loop {
        let max = Duration::from_secs(state.config.current().crew.max_remote_talk_seconds.get().into());
        let heard = state.panels.surface_last_heard(&identity).unwrap_or_else(Instant::now);
        tokio::time::sleep_until((heard + max).into()).await;
        let held = state.panels.reported(&identity).iter().any(|r| r.group_id == group && r.talk == TalkState::Remote);
        if !held || state.users.get(&identity).is_none() {
            break;
        }
        if state.panels.surface_last_heard(&identity).is_some_and(|at| at.elapsed() < max) {
            continue;
        }
        tracing::warn!(
            identity,
            group,
            seconds = max.as_secs(),
            "remote talk released: the control surface went silent"
        );
        let command = Command { talk: Some(Switch::Off), reason: Some("surface-silent"), ..Command::new(&group) };
        state.panels.push(&identity, Push::Command(command));
        if let Err(e) = state.janus.mute_participant(&group, &identity).await {
            tracing::warn!(identity, group, error = %e, "cannot mute a released remote talk in its room");
        }
        break;
    }
    state.panels.unhold(&identity, &group);
}
