//! `/api/admin/positions`: prepared panels (a name and its lines), and `/api/positions`, the
//! open list the panel page offers.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use partyline_shared::Config;
use partyline_shared::config::{Occupants, PinHash, Position};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::extract::present;
use super::{ApiError, ApiJson, ApiPath, AppState, ErrorBody};
use crate::config::{self, Patch, PositionFields};

/// One line of a panel.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineView {
    #[schema(example = "stage-left")]
    pub group_id: String,
    /// The group's name.
    #[schema(example = "Stage Left")]
    pub name: String,
    /// Heard on this panel.
    pub listen: bool,
    /// Has a talk key.
    pub talk: bool,
    /// A program line (the show's sound): listen only, dimmed while someone talks to the panel.
    pub program: bool,
}

impl LineView {
    pub(crate) fn of(config: &Config, group_id: &str, listen: bool, talk: bool) -> Self {
        let name = config.group(group_id).map_or_else(|| group_id.to_owned(), |(_, g)| g.name.clone());
        Self { group_id: group_id.to_owned(), name, listen, talk, program: config.is_program(group_id) }
    }
}

/// A position as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PositionView {
    /// The slug of the name (`/?position=ID`).
    #[schema(example = "stage-manager")]
    pub id: String,
    #[schema(example = "Stage Manager")]
    pub name: String,
    /// Group ids heard.
    pub listen: Vec<String>,
    /// Group ids talked to.
    pub talk: Vec<String>,
    /// The panel's lines: every listened group, then the talk-only ones.
    pub lines: Vec<LineView>,
    /// Whether joining it asks for a PIN: its own, or (without one) its protected groups'.
    pub pin: bool,
    /// Without a PIN of its own: its groups whose PINs joining it asks for (its PIN would stand
    /// for theirs).
    pub group_pins: Vec<String>,
    /// The site its sessions are placed at, if any.
    pub site: Option<String>,
    /// The panel has an announce key (talks on every talk line at once).
    pub announce: bool,
    /// Person keys: the positions (ids) the panel opens a direct line to with one press.
    pub talk_to: Vec<String>,
    /// `one`: a second join is refused while someone holds it; `many`: anyone may join, and a
    /// person key towards it reaches every one of them.
    pub occupants: Occupants,
}

impl PositionView {
    fn of(config: &Config, position: &Position) -> Self {
        let group_pins: Vec<String> = unprotected_groups_with_pins(config, position).collect();
        Self {
            id: position.id(),
            name: position.name.clone(),
            listen: position.listen.clone(),
            talk: position.talk.clone(),
            lines: position.lines().iter().map(|l| LineView::of(config, &l.group, l.listen, l.talk)).collect(),
            pin: position.pin.is_some() || !group_pins.is_empty(),
            group_pins,
            site: position.site.clone(),
            announce: position.announce,
            talk_to: position.talk_to.clone(),
            occupants: position.occupants,
        }
    }
}

/// What the admin is told on saving a position whose groups' PINs are asked.
fn pin_note(position: &PositionView) -> String {
    if position.group_pins.is_empty() {
        return String::new();
    }
    format!(
        "; joining it asks for the PIN of {} (give the position a PIN of its own to ask that one instead)",
        position.group_pins.iter().map(|g| format!("{g:?}")).collect::<Vec<_>>().join(", ")
    )
}

/// The groups of a position without a PIN of its own that ask for theirs: joining it asks for
/// those (a position opens no group its PIN does not stand for).
fn unprotected_groups_with_pins<'a>(config: &'a Config, position: &'a Position) -> impl Iterator<Item = String> + 'a {
    let lines = if position.pin.is_some() { Vec::new() } else { position.lines() };
    lines.into_iter().map(|l| l.group).filter(|g| config.group(g).is_some_and(|(_, group)| group.pin.is_some()))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PositionList {
    pub positions: Vec<PositionView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PositionChanged {
    pub message: String,
    pub position: PositionView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PositionDeleted {
    pub message: String,
    pub id: String,
}

/// A new position, or changes to one (absent fields keep their value). At least one line, at
/// most 12; a group in both lists is one line with listen and talk.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PositionBody {
    #[schema(example = "Stage Manager", max_length = 64)]
    #[serde(default)]
    pub name: Option<String>,
    /// Group ids heard.
    #[serde(default)]
    pub listen: Option<Vec<String>>,
    /// Group ids talked to.
    #[serde(default)]
    pub talk: Option<Vec<String>>,
    /// 4 to 12 digits asked of whoever joins it; `null` removes it. Stored hashed, never shown.
    #[schema(value_type = Option<String>, example = "2468")]
    #[serde(default, deserialize_with = "present")]
    pub pin: Option<Option<String>>,
    /// The site whose Janus nodes its sessions go to while one is up (`janus.nodes[].site`);
    /// `null` removes it.
    #[serde(default, deserialize_with = "present")]
    pub site: Option<Option<String>>,
    /// An announce key on the panel: one press talks on every talk line (needs one).
    #[serde(default)]
    pub announce: Option<bool>,
    /// Person keys: other positions' ids, each opening a direct line to whoever is at it.
    #[serde(default)]
    pub talk_to: Option<Vec<String>>,
    /// `one` (a second join refused while someone holds it) or `many` (the default).
    #[serde(default)]
    pub occupants: Option<Occupants>,
}

impl PositionBody {
    async fn fields(self, state: &AppState) -> Result<PositionFields, ApiError> {
        let pin = hash_pin(state, self.pin).await?;
        Ok(PositionFields {
            name: self.name,
            listen: self.listen,
            talk: self.talk,
            pin,
            site: self.site,
            announce: self.announce,
            talk_to: self.talk_to,
            occupants: self.occupants,
        })
    }
}

/// A PIN field of a request: checked, and hashed off the async threads (the hash is slow on
/// purpose).
pub(super) async fn hash_pin(state: &AppState, pin: Patch<Option<String>>) -> Result<Patch<Option<PinHash>>, ApiError> {
    let Some(Some(pin)) = pin else { return Ok(pin.map(|_| None)) };
    crate::pin::check(&pin, &state.config.current()).map_err(|m| ApiError::BadRequest(format!("pin: {m}")))?;
    let hashed = tokio::task::spawn_blocking(move || crate::pin::hash(&pin))
        .await
        .map_err(|e| ApiError::Internal(format!("cannot hash the PIN: {e}")))?
        .map_err(|e| ApiError::Internal(format!("cannot hash the PIN: {e}")))?;
    Ok(Some(Some(hashed)))
}

/// List the positions.
#[utoipa::path(get, operation_id = "positions_list", path = "/api/admin/positions", tag = "positions", security(("admin_token" = [])),
    responses((status = 200, body = PositionList), (status = 401, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>) -> Json<PositionList> {
    Json(list_of(&state.config.current()))
}

fn list_of(config: &Config) -> PositionList {
    PositionList { positions: config.positions.iter().map(|p| PositionView::of(config, p)).collect() }
}

/// Create a position.
#[utoipa::path(post, operation_id = "positions_create", path = "/api/admin/positions", tag = "positions", security(("admin_token" = [])), request_body = PositionBody,
    responses((status = 201, body = PositionChanged), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, description = "Another position has the same id", body = ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<PositionBody>,
) -> Result<(StatusCode, Json<PositionChanged>), ApiError> {
    let what = format!("create position {:?}", body.name.as_deref().unwrap_or_default());
    let fields = body.fields(&state).await?;
    let position =
        state.config.update(what, move |c| config::create_position(c, fields).map(|p| PositionView::of(c, &p))).await?;
    let message = format!("Position {:?} created{}", position.name, pin_note(&position));
    Ok((StatusCode::CREATED, Json(PositionChanged { message, position })))
}

/// Change a position (a new name gives a new id).
#[utoipa::path(put, operation_id = "positions_update", path = "/api/admin/positions/{id}", tag = "positions", security(("admin_token" = [])), request_body = PositionBody,
    params(("id" = String, Path, description = "Position id")),
    responses((status = 200, body = PositionChanged), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn update(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<PositionBody>,
) -> Result<Json<PositionChanged>, ApiError> {
    let what = format!("update position {id:?}");
    let fields = body.fields(&state).await?;
    let position = state
        .config
        .update(what, move |c| config::update_position(c, &id, fields).map(|p| PositionView::of(c, &p)))
        .await?;
    let message = format!("Position {:?} updated{}", position.name, pin_note(&position));
    Ok(Json(PositionChanged { message, position }))
}

/// Delete a position (crew members who joined with it keep their lines).
#[utoipa::path(delete, operation_id = "positions_delete", path = "/api/admin/positions/{id}", tag = "positions", security(("admin_token" = [])),
    params(("id" = String, Path, description = "Position id")),
    responses((status = 200, body = PositionDeleted), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<PositionDeleted>, ApiError> {
    let what = format!("delete position {id:?}");
    let position = state.config.update(what, move |c| config::delete_position(c, &id)).await?;
    Ok(Json(PositionDeleted { message: format!("Position {:?} deleted", position.name), id: position.id() }))
}

/// A position as the panel page offers it.
#[derive(Debug, Serialize, ToSchema)]
pub struct PublicPosition {
    pub id: String,
    pub name: String,
    pub pin: bool,
    pub lines: Vec<LineView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PublicPositionList {
    pub positions: Vec<PublicPosition>,
}

/// The positions a crew member can join.
#[utoipa::path(get, path = "/api/positions", tag = "users", responses((status = 200, body = PublicPositionList)))]
pub async fn public(State(state): State<AppState>) -> Json<PublicPositionList> {
    let config = state.config.current();
    let positions = list_of(&config)
        .positions
        .into_iter()
        .map(|p| PublicPosition { id: p.id, name: p.name, pin: p.pin, lines: p.lines })
        .collect();
    Json(PublicPositionList { positions })
}
