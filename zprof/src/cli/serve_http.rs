//! serve's HTTP side: hyper's HTTP/1.1 server, each connection a task on
//! one thread, so a slow or hostile client holds only its own connection.
//!
//! Limits, each against one abuse:
//! - headers: 16 KiB and 5 s to arrive (hyper answers 431 or closes), so a
//!   huge header or a client sending a byte a second costs one socket for
//!   5 s;
//! - connections: at most [`MOST_CONNECTIONS`] open; one more closes the
//!   oldest (after the request it may be answering), so idle sockets cannot
//!   keep the next scrape out, and each lives at most
//!   [`CONNECTION_LIFETIME`];
//! - TLS handshakes: 5 s; bcrypt checks: two at a time on blocking threads,
//!   a right password remembered (as exporter-toolkit caches it), so a storm
//!   of guesses cannot starve the scrapes;
//! - map reads: scrapes within [`SHARED_READ`] of a read share it, so a storm
//!   of scrapers costs one read of the maps per interval; reads never
//!   overlap (the session is borrowed only between awaits);
//! - requests: the file's `rate_limit`, a token bucket (429 beyond it).

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeMap, HashSet},
    convert::Infallible,
    hash::{BuildHasher as _, RandomState},
    net::SocketAddr,
    rc::Rc,
    time::{Duration, Instant},
};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode, body::Incoming, header, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpStream,
    sync::{Notify, Semaphore},
};

use crate::{
    cli::service::{Priority, log},
    cli::web_config::{RateLimit, WebConfig},
    collect::session::Session,
    render::exposition::{self, Options},
};

/// Time for a request's line and headers, and for a TLS handshake.
const HEADER_TIME: Duration = Duration::from_secs(5);
/// A request's line and headers larger than this are refused (431).
const MOST_HEADER_BYTES: usize = 16 * 1024;
/// Connections open at once; one more closes the oldest.
pub const MOST_CONNECTIONS: usize = 256;
/// A connection is closed (after its request in flight) when this old.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(300);
/// Scrapes this close to the last read of the maps are answered from it.
pub const SHARED_READ: Duration = Duration::from_millis(100);
/// bcrypt checks at once (each about 70 ms at cost 10).
const BCRYPT_AT_ONCE: usize = 2;

/// What every connection of one serve shares.
pub struct Shared {
    session: RefCell<Session>,
    options: Options,
    config: RefCell<Rc<WebConfig>>,
    last_read: RefCell<Option<LastRead>>,
    bucket: RefCell<Option<Bucket>>,
    bcrypt: Semaphore,
    /// Salted hashes of user:password pairs already verified.
    verified: RefCell<HashSet<u64>>,
    salt: RandomState,
    connections: Connections,
}

/// The last read of the maps, and its renderings.
struct LastRead {
    at: Instant,
    scrape: crate::recording::live::Scrape,
    text: Option<Bytes>,
    openmetrics: Option<Bytes>,
}

impl Shared {
    pub fn new(session: Session, options: Options, config: WebConfig) -> Rc<Self> {
        let bucket = config.rate_limit.map(Bucket::full);
        Rc::new(Self {
            session: RefCell::new(session),
            options,
            config: RefCell::new(Rc::new(config)),
            last_read: RefCell::new(None),
            bucket: RefCell::new(bucket),
            bcrypt: Semaphore::new(BCRYPT_AT_ONCE),
            verified: RefCell::default(),
            salt: RandomState::new(),
            connections: Connections::default(),
        })
    }

    /// The session, for the start and stop lines.
    pub fn session(&self) -> std::cell::Ref<'_, Session> {
        self.session.borrow()
    }

    /// Gives the session back once every connection is gone.
    pub fn into_session(self: Rc<Self>) -> Option<Session> {
        Rc::into_inner(self).map(|shared| shared.session.into_inner())
    }

    /// Takes a re-read web configuration for the connections from now on.
    pub fn replace_config(&self, config: WebConfig) {
        *self.bucket.borrow_mut() = config.rate_limit.map(Bucket::full);
        self.verified.borrow_mut().clear();
        *self.config.borrow_mut() = Rc::new(config);
    }

    pub fn config(&self) -> Rc<WebConfig> {
        self.config.borrow().clone()
    }
}

/// Serves one accepted connection until it closes, is evicted or has lived
/// its time; errors are the client's and are not logged (a scanner's
/// garbage would fill the journal).
pub async fn connection(shared: Rc<Shared>, stream: TcpStream, peer: SocketAddr) {
    let (id, evicted) = shared.connections.open();
    let _open = OpenConnection {
        shared: shared.clone(),
        id,
    };
    let config = shared.config();
    let _ = stream.set_nodelay(true);
    match &config.tls {
        None => http(shared, stream, &evicted).await,
        Some(tls) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(tls.clone());
            let handshake = tokio::time::timeout(HEADER_TIME, acceptor.accept(stream));
            let stream = tokio::select! {
                done = handshake => match done {
                    Ok(Ok(stream)) => stream,
                    _ => return,
                },
                () = evicted.notified() => return,
            };
            if !config.client_allowed_sans.is_empty() {
                let allowed = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .is_some_and(|leaf| {
                        crate::cli::web_config::client_san_allowed(
                            leaf,
                            &config.client_allowed_sans,
                        )
                    });
                if !allowed {
                    log(
                        Priority::Warning,
                        &format!(
                            "zprof serve: {peer}: client certificate names none of client_allowed_sans"
                        ),
                    );
                    return;
                }
            }
            http(shared, stream, &evicted).await
        }
    }
}

/// HTTP/1.1 over `io` until the client closes, the connection is evicted,
/// or it has lived [`CONNECTION_LIFETIME`].
async fn http<I: AsyncRead + AsyncWrite + Unpin + 'static>(
    shared: Rc<Shared>,
    io: I,
    evicted: &Notify,
) {
    let service = service_fn(move |request| answer(shared.clone(), request));
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIME)
        .max_buf_size(MOST_HEADER_BYTES)
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let closing = async {
        tokio::select! {
            () = evicted.notified() => {}
            () = tokio::time::sleep(CONNECTION_LIFETIME) => {}
        }
    };
    tokio::select! {
        _ = connection.as_mut() => return,
        () = closing => connection.as_mut().graceful_shutdown(),
    }
    // The request in flight, if any, is answered; a client that does not
    // read it has the header time to.
    let _ = tokio::time::timeout(HEADER_TIME, connection).await;
}

/// The connections open, oldest first, each with its eviction signal.
#[derive(Default)]
struct Connections {
    open: RefCell<BTreeMap<u64, Rc<Notify>>>,
    next: Cell<u64>,
}

impl Connections {
    /// Registers a new connection; at the limit the oldest is told to close.
    fn open(&self) -> (u64, Rc<Notify>) {
        let mut open = self.open.borrow_mut();
        if open.len() >= MOST_CONNECTIONS
            && let Some((_, oldest)) = open.pop_first()
        {
            oldest.notify_one();
        }
        let id = self.next.get();
        self.next.set(id + 1);
        let evicted = Rc::new(Notify::new());
        open.insert(id, evicted.clone());
        (id, evicted)
    }
}

/// Takes a connection off the registry when its task ends.
struct OpenConnection {
    shared: Rc<Shared>,
    id: u64,
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.shared.connections.open.borrow_mut().remove(&self.id);
    }
}

/// A token bucket for `rate_limit`.
struct Bucket {
    limit: RateLimit,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(limit: RateLimit) -> Self {
        Self {
            limit,
            tokens: f64::from(limit.burst),
            at: Instant::now(),
        }
    }

    /// Takes a token if there is one.
    fn take(&mut self, now: Instant) -> bool {
        let earned = now.duration_since(self.at).as_secs_f64() / self.limit.interval.as_secs_f64();
        self.tokens = (self.tokens + earned).min(f64::from(self.limit.burst));
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

type Answer = Response<Full<Bytes>>;

async fn answer(shared: Rc<Shared>, request: Request<Incoming>) -> Result<Answer, Infallible> {
    let config = shared.config();
    let mut response = route(&shared, &config, &request).await;
    for (name, value) in &config.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    Ok(response)
}

async fn route(shared: &Shared, config: &WebConfig, request: &Request<Incoming>) -> Answer {
    let limited = shared
        .bucket
        .borrow_mut()
        .as_mut()
        .is_some_and(|b| !b.take(Instant::now()));
    if limited {
        return plain(
            StatusCode::TOO_MANY_REQUESTS,
            "too many requests: see rate_limit in the web configuration\n",
        );
    }
    if !authorized(shared, config, request).await {
        let mut response = plain(StatusCode::UNAUTHORIZED, "Unauthorized\n");
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Basic realm=\"zprof\""),
        );
        return response;
    }
    let head = request.method() == hyper::Method::HEAD;
    if request.method() != hyper::Method::GET && !head {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n");
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match request.uri().path() {
        "/metrics" => metrics(shared, wants_openmetrics(request), head),
        "/" => plain(StatusCode::OK, "zprof serve: the stages are at /metrics\n"),
        _ => plain(
            StatusCode::NOT_FOUND,
            "not found: the stages are at /metrics\n",
        ),
    }
}

fn plain(status: StatusCode, body: &'static str) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn wants_openmetrics(request: &Request<Incoming>) -> bool {
    request
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.to_ascii_lowercase()
                .contains("application/openmetrics-text")
        })
}

/// The exposition, from the last read of the maps when it is recent.
fn metrics(shared: &Shared, openmetrics: bool, head: bool) -> Answer {
    let body = match exposition_body(shared, openmetrics) {
        Ok(body) => body,
        Err(err) => {
            log(
                Priority::Warning,
                &format!("zprof serve: reading the maps: {err:#}"),
            );
            return plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "zprof could not read its maps: see its log\n",
            );
        }
    };
    let content_type = if openmetrics {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    };
    let length = body.len();
    let mut response = Response::new(Full::new(if head { Bytes::new() } else { body }));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    if head {
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, length.into());
    }
    response
}

fn exposition_body(shared: &Shared, openmetrics: bool) -> anyhow::Result<Bytes> {
    let mut last = shared.last_read.borrow_mut();
    if last.as_ref().is_none_or(|l| l.at.elapsed() >= SHARED_READ) {
        let scrape = shared.session.borrow_mut().live()?;
        *last = Some(LastRead {
            at: Instant::now(),
            scrape,
            text: None,
            openmetrics: None,
        });
    }
    let last = last.as_mut().expect("read above");
    let rendered = if openmetrics {
        &mut last.openmetrics
    } else {
        &mut last.text
    };
    let options = Options {
        openmetrics,
        ..shared.options
    };
    Ok(rendered
        .get_or_insert_with(|| Bytes::from(exposition::render(&last.scrape, &options)))
        .clone())
}

/// Whether the request may be answered: no users configured, or a Basic
/// user and password matching a bcrypt hash.
async fn authorized(shared: &Shared, config: &WebConfig, request: &Request<Incoming>) -> bool {
    if config.users.is_empty() {
        return true;
    }
    let Some((user, password)) = basic_credentials(request) else {
        return false;
    };
    let Some(hash) = config.users.get(&user) else {
        return false;
    };
    let key = shared.salt.hash_one((&user, &password, hash));
    if shared.verified.borrow().contains(&key) {
        return true;
    }
    let Ok(_turn) = shared.bcrypt.acquire().await else {
        return false;
    };
    let hash = hash.clone();
    let right =
        tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash).unwrap_or(false))
            .await
            .unwrap_or(false);
    if right {
        shared.verified.borrow_mut().insert(key);
    }
    right
}

/// The user and password of an `Authorization: Basic` header.
fn basic_credentials(request: &Request<Incoming>) -> Option<(String, String)> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_its_burst_then_one_per_interval() {
        let mut bucket = Bucket::full(RateLimit {
            interval: Duration::from_secs(1),
            burst: 2,
        });
        let start = bucket.at;
        assert!(bucket.take(start) && bucket.take(start));
        assert!(!bucket.take(start + Duration::from_millis(500)));
        assert!(bucket.take(start + Duration::from_millis(1000)));
        assert!(!bucket.take(start + Duration::from_millis(1100)));
    }

    #[test]
    fn the_oldest_connection_is_told_to_close_at_the_limit() {
        let connections = Connections::default();
        let first = connections.open();
        for _ in 1..MOST_CONNECTIONS {
            connections.open();
        }
        assert_eq!(connections.open.borrow().len(), MOST_CONNECTIONS);
        connections.open();
        assert_eq!(connections.open.borrow().len(), MOST_CONNECTIONS);
        assert!(!connections.open.borrow().contains_key(&first.0));
        // The signal waits for the task: notify_one keeps a permit.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(1), first.1.notified())
                .await
                .expect("told");
        });
    }
}
