//! `zprof serve --web.config.file FILE`: the web configuration file of
//! Prometheus' exporter-toolkit (node_exporter's and every exporter built on
//! it), so an admin sets TLS, basic-auth users, response headers and a rate
//! limit for zprof as for the exporters beside it.
//!
//! The file is read and checked whole before anything attaches: a file that
//! does not parse, an unknown key, a certificate that does not match its key
//! or is outside its validity, a malformed or weak bcrypt hash is refused in
//! one line naming it. SIGHUP reads it again; a bad file then keeps the old
//! configuration (`cli::serve`).
//!
//! TLS is rustls (with ring), so what Go's crypto/tls offers and rustls does
//! not (TLS 1.0 and 1.1, CBC suites, P-521, client certificates asked for but
//! not verified) is refused by name rather than silently dropped. Only
//! HTTP/1.1 is served (ALPN says so), which every Prometheus speaks.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use anyhow::{Context as _, bail, ensure};
use hyper::http::{HeaderName, HeaderValue};
use rustls::{
    RootCertStore, ServerConfig, SupportedProtocolVersion,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _},
    server::WebPkiClientVerifier,
};
use serde::Deserialize;

/// bcrypt costs below this are refused: each step halves a guess's price,
/// and exporter-toolkit's own example (htpasswd -nBC 10) uses 10.
pub const LEAST_BCRYPT_COST: u32 = 10;

/// The file as exporter-toolkit defines it (docs/web-configuration.md there).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsFile>,
    http_server_config: Option<HttpFile>,
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
    rate_limit: Option<RateLimitFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFile {
    cert: Option<String>,
    key: Option<String>,
    client_ca: Option<String>,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    client_ca_file: Option<PathBuf>,
    client_auth_type: Option<String>,
    #[serde(default)]
    client_allowed_sans: Vec<String>,
    min_version: Option<String>,
    max_version: Option<String>,
    #[serde(default)]
    cipher_suites: Vec<String>,
    prefer_server_cipher_suites: Option<bool>,
    #[serde(default)]
    curve_preferences: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpFile {
    /// Accepted for files shared with Go exporters; zprof serves HTTP/1.1.
    #[allow(dead_code)]
    http2: Option<bool>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RateLimitFile {
    interval: Option<String>,
    burst: Option<u32>,
}

/// A token bucket: one request per `interval`, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub interval: Duration,
    pub burst: u32,
}

/// What serve does with its connections and requests.
#[derive(Clone, Default)]
pub struct WebConfig {
    /// Where it was read from (None: no file, plain HTTP with no users).
    pub source: Option<PathBuf>,
    pub tls: Option<Arc<ServerConfig>>,
    /// Whether TLS clients must show a certificate the client CA signed.
    pub requires_client_certificates: bool,
    /// Client certificates must name one of these (DNS, IP, e-mail or URI).
    pub client_allowed_sans: Vec<String>,
    /// User name to bcrypt hash.
    pub users: BTreeMap<String, String>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub rate_limit: Option<RateLimit>,
}

impl WebConfig {
    /// Reads and checks `path`; the error names the file and what is wrong.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the web configuration {}", path.display()))?;
        Self::parse(&text, path.parent().unwrap_or(Path::new(".")))
            .with_context(|| format!("web configuration {}", path.display()))
            .map(|config| Self {
                source: Some(path.to_owned()),
                ..config
            })
    }

    /// Parses a file's text; relative file names are taken from `dir`, the
    /// file's own directory, as exporter-toolkit does.
    fn parse(text: &str, dir: &Path) -> anyhow::Result<Self> {
        // An empty file is an empty mapping to exporter-toolkit.
        let file: File = if text.trim().is_empty() {
            File::default()
        } else {
            serde_norway::from_str(text).map_err(|e| anyhow::anyhow!("{e}"))?
        };
        let tls = file.tls_server_config.unwrap_or_default();
        let http = file.http_server_config.unwrap_or_default();
        for (user, hash) in &file.basic_auth_users {
            check_user(user, hash)?;
        }
        Ok(Self {
            source: None,
            tls: server_config(&tls, dir)?,
            requires_client_certificates: tls.client_auth_type.as_deref()
                == Some("RequireAndVerifyClientCert"),
            client_allowed_sans: tls.client_allowed_sans.clone(),
            users: file.basic_auth_users,
            headers: headers(&http.headers)?,
            rate_limit: file
                .rate_limit
                .as_ref()
                .map(rate_limit)
                .transpose()?
                .flatten(),
        })
    }

    /// One phrase for serve's start line: "TLS 1.2-1.3, client certificates
    /// verified, 2 basic-auth users, 10 requests/s".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match &self.tls {
            Some(_) => parts.push("TLS".to_owned()),
            None => parts.push("plain HTTP".to_owned()),
        }
        if self.requires_client_certificates {
            parts.push("client certificates required".to_owned());
        }
        if !self.client_allowed_sans.is_empty() {
            parts.push(format!(
                "client SANs {}",
                self.client_allowed_sans.join(",")
            ));
        }
        parts.push(match self.users.len() {
            0 => "no authentication".to_owned(),
            n => format!("{n} basic-auth user(s)"),
        });
        if let Some(limit) = self.rate_limit {
            parts.push(format!(
                "at most 1 request per {:?}, {} at once",
                limit.interval, limit.burst
            ));
        }
        parts.join(", ")
    }

    /// Whether a client must prove who it is (a password or a verified
    /// certificate).
    pub fn authenticates(&self) -> bool {
        !self.users.is_empty() || self.requires_client_certificates
    }
}

/// Refuses a user name Basic auth cannot carry and a hash that is not
/// bcrypt's or is cheap to guess.
fn check_user(user: &str, hash: &str) -> anyhow::Result<()> {
    ensure!(
        !user.is_empty() && !user.contains(':'),
        "basic_auth_users: user name {user:?} cannot be sent in Basic authentication (empty, or with a colon)"
    );
    let parts: bcrypt::HashParts = hash.parse().map_err(|_| {
        anyhow::anyhow!(
            "basic_auth_users: {user}'s password is not a bcrypt hash (\"$2y$10$...\", 60 characters); make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`"
        )
    })?;
    ensure!(
        parts.get_cost() >= LEAST_BCRYPT_COST,
        "basic_auth_users: {user}'s bcrypt hash has cost {} (weak: under {LEAST_BCRYPT_COST}); make it again with `htpasswd -nBC {LEAST_BCRYPT_COST} \"\" | tr -d ':\\n'`",
        parts.get_cost()
    );
    Ok(())
}

/// The response headers exporter-toolkit lets a file set, each with the
/// values it accepts.
fn headers(wanted: &BTreeMap<String, String>) -> anyhow::Result<Vec<(HeaderName, HeaderValue)>> {
    const ALLOWED: [(&str, &[&str]); 5] = [
        ("Content-Security-Policy", &[]),
        ("X-Frame-Options", &["deny", "sameorigin"]),
        ("X-Content-Type-Options", &["nosniff"]),
        ("X-XSS-Protection", &[]),
        ("Strict-Transport-Security", &[]),
    ];
    let mut out = Vec::new();
    for (name, value) in wanted {
        let Some((_, values)) = ALLOWED.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) else {
            bail!(
                "http_server_config.headers: {name} cannot be set (only {})",
                ALLOWED.map(|(n, _)| n).join(", ")
            );
        };
        if value.is_empty() {
            continue; // unset, as exporter-toolkit reads a blank value
        }
        ensure!(
            values.is_empty() || values.iter().any(|v| v.eq_ignore_ascii_case(value)),
            "http_server_config.headers: {name} {value:?} is not one of {}",
            values.join(", ")
        );
        out.push((
            HeaderName::from_bytes(name.as_bytes())?,
            HeaderValue::from_str(value)
                .with_context(|| format!("http_server_config.headers: {name}'s value"))?,
        ));
    }
    Ok(out)
}

/// `rate_limit`; an interval of 0 turns it off, as in exporter-toolkit.
fn rate_limit(file: &RateLimitFile) -> anyhow::Result<Option<RateLimit>> {
    let interval = match &file.interval {
        Some(text) => go_duration(text).with_context(|| format!("rate_limit.interval {text:?}"))?,
        None => Duration::ZERO,
    };
    if interval.is_zero() {
        return Ok(None);
    }
    let burst = file.burst.unwrap_or(0);
    ensure!(
        burst > 0,
        "rate_limit.burst must be 1 or more (the requests allowed at once)"
    );
    Ok(Some(RateLimit { interval, burst }))
}

/// A duration as Prometheus writes them: "500ms", "10s", "1m30s", "0".
fn go_duration(text: &str) -> anyhow::Result<Duration> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    ensure!(!rest.is_empty(), "empty");
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        ensure!(digits > 0, "expected a number, as in 500ms, 10s or 1m30s");
        let number: u64 = rest[..digits].parse()?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            other => bail!("unknown unit {other:?} (ms, s, m or h)"),
        };
        total += scale * u32::try_from(number)?;
        rest = &rest[unit..];
    }
    Ok(total)
}

/// The rustls configuration of `tls_server_config`, or None without one
/// (an empty section, as exporter-toolkit reads it, is no TLS).
fn server_config(tls: &TlsFile, dir: &Path) -> anyhow::Result<Option<Arc<ServerConfig>>> {
    let cert_pem = pem_text("cert", &tls.cert, &tls.cert_file, dir)?;
    let key_pem = pem_text("key", &tls.key, &tls.key_file, dir)?;
    let (cert_pem, key_pem) = match (cert_pem, key_pem) {
        (None, None) => {
            ensure!(
                tls.client_ca.is_none() && tls.client_ca_file.is_none(),
                "tls_server_config: a client CA needs the server's cert_file and key_file"
            );
            return Ok(None);
        }
        (Some(c), Some(k)) => (c, k),
        (Some(_), None) => bail!("tls_server_config: cert_file without key_file"),
        (None, Some(_)) => bail!("tls_server_config: key_file without cert_file"),
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("tls_server_config: the certificate is not PEM: {e}"))?;
    ensure!(
        !chain.is_empty(),
        "tls_server_config: no certificate in the cert PEM"
    );
    check_validity(&chain[0])?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| anyhow::anyhow!("tls_server_config: the key is not a PEM private key: {e}"))?;
    let provider = Arc::new(provider(tls)?);
    let verifier = client_verifier(tls, dir, &provider)?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(tls)?)
        .map_err(|e| anyhow::anyhow!("tls_server_config: {e}"))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => {
                anyhow::anyhow!("tls_server_config: the key does not match the certificate")
            }
            other => anyhow::anyhow!("tls_server_config: {other}"),
        })?;
    config.ignore_client_order = tls.prefer_server_cipher_suites.unwrap_or(true);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(Arc::new(config)))
}

/// The PEM text of `name`, given inline or as `name_file` (not both).
fn pem_text(
    name: &str,
    inline: &Option<String>,
    file: &Option<PathBuf>,
    dir: &Path,
) -> anyhow::Result<Option<String>> {
    match (inline, file) {
        (Some(_), Some(_)) => bail!("tls_server_config: {name} and {name}_file are both given"),
        (Some(text), None) => Ok(Some(text.clone())),
        (None, Some(path)) => {
            let path = dir.join(path);
            std::fs::read_to_string(&path)
                .map(Some)
                .with_context(|| format!("tls_server_config.{name}_file {}", path.display()))
        }
        (None, None) => Ok(None),
    }
}

/// Refuses a server certificate outside its validity: every client would
/// refuse it at each scrape, and the admin would see only failed scrapes.
fn check_validity(cert: &CertificateDer<'_>) -> anyhow::Result<()> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert)
        .map_err(|e| anyhow::anyhow!("tls_server_config: the certificate cannot be read: {e}"))?;
    let validity = parsed.validity();
    let now = x509_parser::time::ASN1Time::now();
    ensure!(
        validity.not_after >= now,
        "tls_server_config: the certificate expired on {} (renew it)",
        validity.not_after
    );
    ensure!(
        validity.not_before <= now,
        "tls_server_config: the certificate is not valid before {}",
        validity.not_before
    );
    Ok(())
}

/// The TLS versions from `min_version` to `max_version` (TLS12, TLS13).
fn versions(tls: &TlsFile) -> anyhow::Result<Vec<&'static SupportedProtocolVersion>> {
    let rank = |field: &str, value: &Option<String>, default: u8| -> anyhow::Result<u8> {
        match value.as_deref() {
            None => Ok(default),
            Some("TLS12") => Ok(2),
            Some("TLS13") => Ok(3),
            Some(v @ ("TLS10" | "TLS11")) => bail!(
                "tls_server_config.{field} {v}: zprof's TLS (rustls) offers TLS 1.2 and 1.3 only (1.0 and 1.1 are deprecated, RFC 8996)"
            ),
            Some(v) => bail!("tls_server_config.{field} {v:?} is not TLS12 or TLS13"),
        }
    };
    let (least, most) = (
        rank("min_version", &tls.min_version, 2)?,
        rank("max_version", &tls.max_version, 3)?,
    );
    ensure!(
        least <= most,
        "tls_server_config: min_version is above max_version"
    );
    Ok([(2, &rustls::version::TLS12), (3, &rustls::version::TLS13)]
        .into_iter()
        .filter(|(rank, _)| (least..=most).contains(rank))
        .map(|(_, version)| version)
        .collect())
}

/// ring's provider narrowed to the file's cipher suites (TLS 1.2 only, as
/// Go ignores the list for 1.3) and curves, in the file's order.
fn provider(tls: &TlsFile) -> anyhow::Result<CryptoProvider> {
    // ring, not aws-lc-rs: it builds with the C compiler alone. rustls marks
    // it deprecated for lacking post-quantum key exchange, which a scrape's
    // counters do not call for.
    #[allow(deprecated)]
    let mut provider = rustls::crypto::ring::default_provider();
    if !tls.cipher_suites.is_empty() {
        let offered: Vec<_> = provider.cipher_suites.clone();
        let name = |s: &rustls::SupportedCipherSuite| s.suite().as_str().unwrap_or("?").to_owned();
        let mut chosen: Vec<_> = offered
            .iter()
            .filter(|s| s.version() == &rustls::version::TLS13)
            .cloned()
            .collect();
        for wanted in &tls.cipher_suites {
            let Some(suite) = offered.iter().find(|s| &name(s) == wanted) else {
                bail!(
                    "tls_server_config.cipher_suites: {wanted} is not offered by zprof's TLS (rustls): {}",
                    offered
                        .iter()
                        .filter(|s| s.version() == &rustls::version::TLS12)
                        .map(name)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            };
            chosen.push(*suite);
        }
        provider.cipher_suites = chosen;
    }
    if !tls.curve_preferences.is_empty() {
        let offered = provider.kx_groups.clone();
        provider.kx_groups = tls
            .curve_preferences
            .iter()
            .map(|curve| {
                let group = match curve.as_str() {
                    "X25519" => rustls::NamedGroup::X25519,
                    "CurveP256" => rustls::NamedGroup::secp256r1,
                    "CurveP384" => rustls::NamedGroup::secp384r1,
                    other => bail!(
                        "tls_server_config.curve_preferences: {other} is not offered by zprof's TLS (rustls): X25519, CurveP256, CurveP384"
                    ),
                };
                offered
                    .iter()
                    .find(|g| g.name() == group)
                    .copied()
                    .ok_or_else(|| anyhow::anyhow!("curve {curve} is missing from rustls"))
            })
            .collect::<anyhow::Result<_>>()?;
    }
    Ok(provider)
}

/// The client certificate policy of `client_auth_type`.
fn client_verifier(
    tls: &TlsFile,
    dir: &Path,
    provider: &Arc<CryptoProvider>,
) -> anyhow::Result<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
    let kind = tls.client_auth_type.as_deref().unwrap_or("NoClientCert");
    let ca = pem_text("client_ca", &tls.client_ca, &tls.client_ca_file, dir)?;
    let optional = match kind {
        "NoClientCert" => {
            ensure!(
                tls.client_allowed_sans.is_empty(),
                "tls_server_config.client_allowed_sans needs client_auth_type RequireAndVerifyClientCert"
            );
            return Ok(WebPkiClientVerifier::no_client_auth());
        }
        "RequireAndVerifyClientCert" => false,
        "VerifyClientCertIfGiven" => {
            ensure!(
                tls.client_allowed_sans.is_empty(),
                "tls_server_config.client_allowed_sans needs client_auth_type RequireAndVerifyClientCert: with VerifyClientCertIfGiven a client without a certificate has no SAN to match"
            );
            true
        }
        "RequestClientCert" | "RequireAnyClientCert" => bail!(
            "tls_server_config.client_auth_type {kind} accepts certificates it does not verify, which zprof's TLS (rustls) does not offer; use RequireAndVerifyClientCert with client_ca_file"
        ),
        other => bail!(
            "tls_server_config.client_auth_type {other:?} is not one of NoClientCert, RequireAndVerifyClientCert, VerifyClientCertIfGiven"
        ),
    };
    let ca = ca.ok_or_else(|| {
        anyhow::anyhow!("tls_server_config.client_auth_type {kind} needs client_ca_file (the CA that signs client certificates)")
    })?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        let cert =
            cert.map_err(|e| anyhow::anyhow!("tls_server_config.client_ca: not PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| anyhow::anyhow!("tls_server_config.client_ca: {e}"))?;
    }
    ensure!(
        !roots.is_empty(),
        "tls_server_config.client_ca: no certificate in it"
    );
    let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
    let builder = if optional {
        builder.allow_unauthenticated()
    } else {
        builder
    };
    builder
        .build()
        .map_err(|e| anyhow::anyhow!("tls_server_config.client_ca: {e}"))
}

/// Whether the verified client certificate `der` names one of `allowed` as
/// a subject alternative name (DNS, IP, e-mail or URI), as exporter-toolkit
/// matches client_allowed_sans.
pub fn client_san_allowed(der: &[u8], allowed: &[String]) -> bool {
    use x509_parser::extensions::GeneralName;
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return false;
    };
    let Ok(Some(sans)) = cert.subject_alternative_name() else {
        return false;
    };
    sans.value.general_names.iter().any(|name| {
        let text = match name {
            GeneralName::DNSName(s) | GeneralName::RFC822Name(s) | GeneralName::URI(s) => {
                (*s).to_owned()
            }
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*bytes).unwrap()).to_string(),
                16 => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(*bytes).unwrap()).to_string(),
                _ => return false,
            },
            _ => return false,
        };
        allowed.iter().any(|a| a == &text)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // htpasswd -nbBC 10 prometheus secret (Debian 12's apache2-utils).
    const COST_10: &str = "$2y$10$hLPdzylf5rD1yG0fpCCXPOJsV/MLaobajVV34uiDLpaFwrXQneaMe";
    // The same password at cost 4 (htpasswd -nbBC 4).
    const COST_4: &str = "$2y$04$D8LjfnapUsd/B3p90Vmxm.R7LOdGPzJwo4NSQKlAn.FL6G1zk5xE2";

    fn parse(text: &str) -> anyhow::Result<WebConfig> {
        WebConfig::parse(text, Path::new("/nonexistent"))
    }

    fn error(text: &str) -> String {
        format!("{:#}", parse(text).err().expect("refused"))
    }

    #[test]
    fn an_empty_file_is_plain_http_without_users() {
        let config = parse("").unwrap();
        assert!(config.tls.is_none() && config.users.is_empty() && config.rate_limit.is_none());
        assert!(!config.authenticates());
    }

    #[test]
    fn users_headers_and_rate_limit_are_read_as_exporter_toolkit_writes_them() {
        let config = parse(&format!(
            "basic_auth_users:\n  prometheus: {COST_10}\nhttp_server_config:\n  http2: true\n  headers:\n    X-Frame-Options: deny\n    Content-Security-Policy: \"\"\nrate_limit:\n  interval: 1m30s\n  burst: 5\n"
        ))
        .unwrap();
        assert_eq!(config.users.len(), 1);
        assert!(config.authenticates());
        assert_eq!(config.headers.len(), 1, "a blank header is unset");
        assert_eq!(
            config.rate_limit,
            Some(RateLimit {
                interval: Duration::from_secs(90),
                burst: 5
            })
        );
    }

    #[test]
    fn bad_files_are_refused_naming_what_is_wrong() {
        for (text, says) in [
            (
                "basic_auth_users:\n  a: \"unterminated",
                "while scanning a quoted scalar",
            ),
            ("basic_auth_user: {}", "unknown field `basic_auth_user`"),
            (
                &format!("basic_auth_users:\n  p: {COST_4}"),
                "cost 4 (weak: under 10)",
            ),
            ("basic_auth_users:\n  p: secret", "not a bcrypt hash"),
            (
                &format!("basic_auth_users:\n  \"a:b\": {COST_10}"),
                "cannot be sent",
            ),
            (
                "http_server_config:\n  headers:\n    Server: zprof",
                "Server cannot be set",
            ),
            (
                "http_server_config:\n  headers:\n    X-Frame-Options: allow",
                "not one of deny",
            ),
            ("rate_limit:\n  interval: 1x\n  burst: 1", "unknown unit"),
            ("rate_limit:\n  interval: 1s", "burst must be 1 or more"),
            (
                "tls_server_config:\n  cert_file: /nonexistent/c.pem\n  key_file: k.pem",
                "cert_file /nonexistent/c.pem",
            ),
            (
                "tls_server_config:\n  cert: x",
                "cert_file without key_file",
            ),
            (
                "tls_server_config:\n  cert: x\n  key: y",
                "no certificate in the cert PEM",
            ),
        ] {
            let got = error(text);
            assert!(got.contains(says), "{text:?}: {got}");
        }
    }

    #[test]
    fn a_go_duration_is_read_whole() {
        assert_eq!(go_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(go_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(go_duration("1h2m3s").unwrap(), Duration::from_secs(3723));
        assert!(go_duration("s").is_err() && go_duration("").is_err());
    }
}
