//! The console's HTTP/JSON API (`/api/v1/…`, docs/openapi.json) and its pages. Every request
//! passes the [`Guard`] first; bodies are bounded ([`MAX_BODY`]) and so are connections
//! (`crate::MAX_CONNECTIONS`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, Stream};
use horde_scenario::control::Command;
use serde::Deserialize;

use crate::guard::{Access, Guard, Headers, Tickets};
use crate::hub::{Hub, Refused};
use crate::runs::{self, StartRun};
use crate::{emu, topo};

/// A request body is at most this long (a command is at most 16 KiB).
pub const MAX_BODY: usize = 64 * 1024;
/// Event lines sent per read of the hub.
const BATCH: usize = 512;

pub struct App {
    pub hub: Arc<Hub>,
    pub guard: Guard,
    /// Where past runs' report directories are.
    pub runs_dir: std::path::PathBuf,
    /// Runs can be started from the console (not when it is attached to one run).
    pub can_start: bool,
    /// Served over TLS.
    pub tls: bool,
    /// One-time tickets for the event stream and report files (`POST /api/v1/tickets`), on the
    /// clock since the console started.
    pub tickets: std::sync::Mutex<(std::time::Instant, Tickets)>,
    /// `emu exec` and `force = true`, as the operator allowed them.
    pub allow: crate::Allow,
}

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/assets/{name}", get(asset))
        .route("/api/v1/openapi.json", get(|| async { Json(crate::openapi::document()) }))
        .route("/api/v1/runs", get(list).post(start))
        .route("/api/v1/runs/{id}", get(info))
        .route("/api/v1/runs/{id}/commands", post(command))
        .route("/api/v1/runs/{id}/events", get(events))
        .route("/api/v1/runs/{id}/report/{*path}", get(report))
        .route("/api/v1/past", get(past))
        .route("/api/v1/tickets", post(ticket))
        .route("/api/v1/compare", post(compare))
        .route("/api/v1/scenario-schema", get(|| async { Json(schemars::schema_for!(horde_model::scenario::RawScenario)) }))
        .route("/api/v1/topologies", get(topologies).put(save_topology))
        .route("/api/v1/topologies/open", post(open_topology))
        .route("/api/v1/topologies/check", post(check_topology))
        .route("/api/v1/emu", get(emu_status).post(emu_up))
        .route("/api/v1/emu/{id}", get(emu_detail).delete(emu_down))
        .route("/api/v1/emu/{id}/counters", get(emu_counters))
        .route("/api/v1/emu/{id}/link", post(emu_link))
        .route("/api/v1/emu/{id}/exec", post(emu_exec))
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

/// A refusal as JSON: `{"error": "…"}` with its status.
pub fn refuse(status: u16, message: impl Into<String>) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    (code, Json(serde_json::json!({ "error": message.into() }))).into_response()
}

fn refused(r: Refused) -> Response {
    let status = match r {
        Refused::NoSuchRun(_) => 404,
        Refused::Finished(_) | Refused::Full | Refused::Stopping(_) | Refused::Command(_) => 409,
        Refused::Busy(_) => 429,
    };
    refuse(status, r.to_string())
}

/// Marks a response to a request that showed the token: its connection has authenticated
/// and no longer counts against the unauthenticated places (`crate::serve`).
#[derive(Clone, Copy, Debug)]
pub struct Authenticated;

async fn guard(State(app): State<Arc<App>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let access = if path == "/" || path.starts_with("/assets/") { Access::Public } else { Access::Token };
    let verdict = {
        let h = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok());
        let headers = Headers { host: h("host"), origin: h("origin"), sec_fetch_site: h("sec-fetch-site"), authorization: h("authorization") };
        // a ticket only where a browser cannot send the header: a GET of the event stream or a
        // report file, never an API call or a command
        let ticket = (req.method() == axum::http::Method::GET && crate::guard::ticket_path(&path))
            .then(|| req.uri().query())
            .flatten()
            .and_then(|q| q.split('&').filter_map(|kv| kv.split_once('=')).find(|(k, _)| *k == "ticket").map(|(_, v)| v.to_string()));
        app.guard.check(&headers, access, || {
            ticket.is_some_and(|t| {
                let mut tk = app.tickets.lock().unwrap_or_else(|p| p.into_inner());
                let now = tk.0.elapsed().as_nanos() as u64;
                tk.1.redeem(&t, &path, now)
            })
        })
    };
    match verdict {
        Err(r) => refuse(r.status(), r.message()),
        Ok(shown) => {
            let mut r = next.run(req).await;
            if shown {
                r.extensions_mut().insert(Authenticated);
            }
            let h = r.headers_mut();
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
            h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
            // the printed URL's token never leaves in a Referer
            h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
            if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
                h.insert(
                    header::CONTENT_SECURITY_POLICY,
                    HeaderValue::from_static("default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'"),
                );
            }
            r
        }
    }
}

#[derive(Deserialize)]
struct TicketFor {
    path: String,
}

/// `POST /api/v1/tickets` with `{"path": "/api/v1/runs/ID/events"}` (or a run's report file):
/// a one-time ticket for that path, good for 30 s, to show as `?ticket=…` where a browser
/// cannot send the token's header (`EventSource`, a report opened in a new tab).
async fn ticket(State(app): State<Arc<App>>, body: String) -> Response {
    let Ok(TicketFor { path }) = serde_json::from_str(&body) else {
        return refuse(400, "a ticket is asked for as {\"path\": \"/api/v1/runs/ID/events\"}");
    };
    if !crate::guard::ticket_path(&path) {
        return refuse(400, "tickets are for a run's event stream (/api/v1/runs/ID/events) and report files (/api/v1/runs/ID/report/FILE) only");
    }
    let Ok(secret) = crate::guard::new_token() else { return refuse(500, "drawing a ticket failed") };
    let mut tk = app.tickets.lock().unwrap_or_else(|p| p.into_inner());
    let now = tk.0.elapsed().as_nanos() as u64;
    tk.1.issue(secret.clone(), &path, now);
    Json(serde_json::json!({ "ticket": secret, "path": path, "expires_in_s": crate::guard::TICKET_NS / 1_000_000_000 })).into_response()
}

async fn page() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], crate::assets::INDEX).into_response()
}

async fn asset(Path(name): Path<String>) -> Response {
    match crate::assets::get(&name) {
        Some((mime, body)) => ([(header::CONTENT_TYPE, mime)], body).into_response(),
        None => refuse(404, format!("no asset {name}")),
    }
}

async fn list(State(app): State<Arc<App>>) -> Response {
    Json(app.hub.list()).into_response()
}

async fn info(State(app): State<Arc<App>>, Path(id): Path<u32>) -> Response {
    app.hub.info(id).map(|i| Json(i).into_response()).unwrap_or_else(refused)
}

async fn start(State(app): State<Arc<App>>, body: String) -> Response {
    if !app.can_start {
        return refuse(409, "this console is attached to one run (horde run … --ui): start others with `horde ui`");
    }
    let req: StartRun = match serde_json::from_str(&body) {
        Ok(r) => r,
        Err(e) => return refuse(400, format!("{e}: a start is {{\"scenario\": \"examples/wow.toml\"}} (or {{\"form\": {{…}}}}, a scenario's fields, or {{\"toml\": \"…\"}}, a scenario's text) with optional players, online, duration, seed")),
    };
    match runs::start(&app.hub, &app.runs_dir, req).await {
        Ok(info) => (StatusCode::CREATED, Json(info)).into_response(),
        Err((status, m)) => refuse(status, m),
    }
}

/// How long a command waits for the run's answer (a run answers within its driver's 50-ms poll;
/// through agents, within a quarter second).
const COMMAND_ANSWER: std::time::Duration = std::time::Duration::from_secs(10);

/// A command: the same JSON object as a `--commands` line, answered when the run has applied
/// it (200, the run's `Reply`) or refused it (409, the `Reply` with the reason), or refused
/// here at once (400: not a command; 404: no such run; 409: finished or stopping).
async fn command(State(app): State<Arc<App>>, Path(id): Path<u32>, body: String) -> Response {
    let c: Command = match Command::parse(body.trim()) {
        Ok(c) => c,
        Err(m) => return refuse(400, m),
    };
    if let Command::Players { online, .. } = &c {
        if let Err((_, m)) = horde_model::scenario::check_players(*online, None) {
            return refuse(400, format!("online: {m}"));
        }
    }
    let answer = match app.hub.command(id, c) {
        Ok(a) => a,
        Err(r) => return refused(r),
    };
    match tokio::time::timeout(COMMAND_ANSWER, answer).await {
        Ok(Ok(reply)) if reply.applied => Json(reply).into_response(),
        Ok(Ok(reply)) => (StatusCode::CONFLICT, Json(reply)).into_response(),
        Ok(Err(_)) => refuse(409, format!("run {id} ended before it answered the command")),
        Err(_) => refuse(504, format!("run {id} did not answer the command within {} s", COMMAND_ANSWER.as_secs())),
    }
}

#[derive(Deserialize)]
struct After {
    after: Option<u64>,
}

/// The run's event lines as server-sent events, each with its number as the event id: a
/// client that reconnects with `Last-Event-ID` (browsers do) or `?after=N` gets every line
/// after it still kept; the stream ends after the run's `finished` line.
async fn events(State(app): State<Arc<App>>, Path(id): Path<u32>, Query(q): Query<After>, headers: HeaderMap) -> Response {
    if let Err(r) = app.hub.info(id) {
        return refused(r);
    }
    let last = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok());
    let from = last.or(q.after).map_or(0, |n| n + 1);
    Sse::new(stream_from(app.hub.clone(), id, from)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}

fn stream_from(hub: Arc<Hub>, id: u32, from: u64) -> impl Stream<Item = Result<Event, Infallible>> {
    let changes = hub.changes();
    stream::unfold((hub, changes, from, false), move |(hub, mut changes, next, done)| async move {
        if done {
            return None;
        }
        loop {
            let Ok((first, lines, finished)) = hub.since(id, next, BATCH) else { return None };
            if !lines.is_empty() {
                let n = lines.len() as u64;
                let evs: Vec<Result<Event, Infallible>> =
                    lines.into_iter().enumerate().map(|(k, l)| Ok(Event::default().id((first + k as u64).to_string()).data(l))).collect();
                let over = finished && hub.since(id, first + n, 1).map(|x| x.1.is_empty()).unwrap_or(true);
                return Some((stream::iter(evs), (hub, changes, first + n, over)));
            }
            if finished {
                return None;
            }
            if changes.changed().await.is_err() {
                return None;
            }
        }
    })
    .flat_map(|s| s)
}

use futures_util::StreamExt as _;

const REPORT_CSP: &str =
    "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'";

/// A file of a run's report directory (its index.html, charts, summary.json).
async fn report(State(app): State<Arc<App>>, Path((id, path)): Path<(u32, String)>) -> Response {
    let out = match app.hub.info(id) {
        Ok(i) => std::path::PathBuf::from(i.out),
        Err(r) => return refused(r),
    };
    match runs::report_file(&out, &path) {
        // A report is a self-contained page with one inline script (its charts' check): it runs
        // sandboxed, in an origin of its own, so it can never use the console's cookie.
        Ok((mime, bytes)) => ([(header::CONTENT_TYPE, mime), (header::CONTENT_SECURITY_POLICY, REPORT_CSP)], bytes).into_response(),
        Err(m) => refuse(404, m),
    }
}

/// Past runs: the report directories under the runs directory, with their verdicts.
async fn past(State(app): State<Arc<App>>) -> Response {
    let dir = app.runs_dir.clone();
    match tokio::task::spawn_blocking(move || runs::past(&dir)).await {
        Ok(v) => Json(v).into_response(),
        Err(_) => refuse(500, "listing past runs failed"),
    }
}

/// `POST /api/v1/compare` with `{"reports": [NAME, …]}` (2 to 8 report directories of the
/// runs directory, by name, the first the baseline): `horde compare`'s document, and its page
/// as `html`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompareRequest {
    reports: Vec<String>,
    #[serde(default)]
    alpha: Option<f64>,
}

/// Reports one comparison may set side by side from the console.
const MAX_COMPARED: usize = 8;

async fn compare(State(app): State<Arc<App>>, body_text: String) -> Response {
    let req: CompareRequest = match body(&body_text, "{\"reports\": [\"run-a\", \"run-b\"]} (report directories of the runs directory, by name)") {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    if !(2..=MAX_COMPARED).contains(&req.reports.len()) {
        return refuse(400, format!("reports: give 2 to {MAX_COMPARED} report directories (the first is the baseline)"));
    }
    if let Some(bad) = req.reports.iter().find(|n| n.is_empty() || n.len() > 255 || n.contains('/') || n.contains('\0') || *n == "." || *n == "..") {
        return refuse(400, format!("reports: {:?} is not the name of a report directory of the runs directory", bad.chars().take(80).collect::<String>()));
    }
    let dir = app.runs_dir.clone();
    let alpha = req.alpha.unwrap_or(horde_scenario::compare::ALPHA);
    let done = blocking(move || {
        let reports = req
            .reports
            .iter()
            .map(|n| horde_scenario::compare::load(&dir, &format!("{n}/summary.json"), n).map(|r| (n.clone(), r)))
            .collect::<Result<Vec<_>, _>>()?;
        horde_scenario::compare::compare(&reports, alpha)
    })
    .await;
    match done {
        Ok(Ok(c)) => {
            let page = horde_scenario::compare::html(&c);
            let mut v = serde_json::to_value(&c).unwrap_or_default();
            v["html"] = serde_json::Value::String(page);
            Json(v).into_response()
        }
        Ok(Err(m)) => refuse(400, m),
        Err(r) => r.into_response(),
    }
}

/// A JSON body of type `T`, or the refusal naming what is wrong and what is expected.
fn body<T: serde::de::DeserializeOwned>(text: &str, expected: &str) -> Result<T, Bad> {
    serde_json::from_str(text).map_err(|e| Bad(400, format!("{e}: expected {expected}")))
}

/// A refusal not yet made into a response.
struct Bad(u16, String);

impl IntoResponse for Bad {
    fn into_response(self) -> Response {
        refuse(self.0, self.1)
    }
}

/// Runs blocking work (files, the emulator's state) off the server's threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Bad> {
    tokio::task::spawn_blocking(f).await.map_err(|_| Bad(500, "the request's work failed".into()))
}

async fn topologies(State(app): State<Arc<App>>) -> Response {
    let dir = app.runs_dir.clone();
    match blocking(move || topo::list(&dir)).await {
        Ok(v) => Json(serde_json::json!({ "files": v, "saved_in": topo::saved_dir(&app.runs_dir).display().to_string() })).into_response(),
        Err(r) => r.into_response(),
    }
}

/// A file (by path or as text) into the editor's form, checked by the planner.
async fn open_topology(body_text: String) -> Response {
    let req: topo::OpenTopology = match body(&body_text, "{\"path\": \"examples/topologies/access.toml\"} or {\"text\": \"…\"}") {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    let text = match (req.path, req.text) {
        (Some(p), None) => match blocking(move || topo::open(&p)).await {
            Ok(Ok(t)) => t,
            Ok(Err(m)) => return refuse(400, m),
            Err(r) => return r.into_response(),
        },
        (None, Some(t)) => t,
        _ => return refuse(400, "give either path or text"),
    };
    Json(topo::check_text(&text)).into_response()
}

/// The editor's form: its canonical TOML and the planner's verdict.
async fn check_topology(body_text: String) -> Response {
    match body::<horde_topo::RawTopology>(&body_text, "a topology as the editor holds it") {
        Ok(raw) => Json(topo::check_raw(raw)).into_response(),
        Err(r) => r.into_response(),
    }
}

async fn save_topology(State(app): State<Arc<App>>, body_text: String) -> Response {
    let req: topo::Save = match body(&body_text, "{\"name\": \"lab\", \"topology\": {…}}") {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    let dir = app.runs_dir.clone();
    match blocking(move || topo::save(&dir, &req).map(|p| (p, topo::check_raw(req.topology)))).await {
        Ok(Ok((path, checked))) => Json(serde_json::json!({ "path": path.display().to_string(), "checked": checked })).into_response(),
        Ok(Err(m)) => refuse(400, m),
        Err(r) => r.into_response(),
    }
}

async fn emu_status() -> Response {
    match blocking(emu::status).await {
        Ok(s) => Json(s).into_response(),
        Err(r) => r.into_response(),
    }
}

async fn emu_up(State(app): State<Arc<App>>, body_text: String) -> Response {
    let req: emu::Up = match body(&body_text, "{\"topology\": \"FILE.toml\", \"live\": true}") {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    match emu::up(&req, app.allow.force).await {
        Ok(id) => (StatusCode::CREATED, Json(serde_json::json!({ "id": id }))).into_response(),
        Err((s, m)) => refuse(s, m),
    }
}

async fn emu_detail(Path(id): Path<String>) -> Response {
    if let Err(m) = horde_topo::check_exp_id(&id) {
        return refuse(400, m);
    }
    match blocking(move || emu::detail(&id)).await {
        Ok(Ok(d)) => Json(d).into_response(),
        Ok(Err(m)) => refuse(404, m),
        Err(r) => r.into_response(),
    }
}

async fn emu_down(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    match emu::down(&id, &app.runs_dir).await {
        Ok(r) => Json(r).into_response(),
        Err((s, m)) => refuse(s, m),
    }
}

async fn emu_counters(Path(id): Path<String>) -> Response {
    if let Err(m) = horde_topo::check_exp_id(&id) {
        return refuse(400, m);
    }
    match blocking(move || emu::counters(&id)).await {
        Ok(Ok(c)) => Json(c).into_response(),
        Ok(Err(m)) => refuse(404, m),
        Err(r) => r.into_response(),
    }
}

async fn emu_link(Path(id): Path<String>, body_text: String) -> Response {
    let req: emu::LinkSet = match body(&body_text, "{\"a\": \"r1\", \"b\": \"h3\", \"delay\": \"60ms\"} with the options of horde emu link") {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    if let Err(m) = horde_topo::check_exp_id(&id) {
        return refuse(400, m);
    }
    match emu::link(&id, &req).await {
        Ok(r) => Json(r).into_response(),
        Err((s, m)) => refuse(s, m),
    }
}

async fn emu_exec(State(app): State<Arc<App>>, Path(id): Path<String>, body_text: String) -> Response {
    if !app.allow.exec {
        return refuse(403, "this console was started with --no-exec: it runs no command in emulated nodes (use `horde emu exec` on the machine, or start the console without --no-exec)");
    }
    let req: emu::Exec = match body(&body_text, "{\"node\": \"h1\", \"argv\": [\"ip\", \"addr\"]}") {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    if let Err(m) = horde_topo::check_exp_id(&id) {
        return refuse(400, m);
    }
    match emu::exec(&id, &req).await {
        Ok(r) => Json(r).into_response(),
        Err((s, m)) => refuse(s, m),
    }
}
