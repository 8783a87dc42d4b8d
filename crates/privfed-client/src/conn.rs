//! A minimal HTTP/1.1 keep-alive connection for the load generator.
//!
//! A simulated device holds one TCP connection and sends one request at a time on it, like a
//! phone that draws, computes and posts. The general-purpose [`crate::client::Client`] (reqwest)
//! parses a URL, consults a connection pool and builds a header map for every request; at tens of
//! thousands of requests per second on two cores that costs as much CPU as the server itself, so
//! the load generator would measure itself. This connection writes a pre-formatted request head
//! and the body in one `write`, and reads the answer with `httparse`:
//! * only `Content-Length` bodies are accepted (the server never answers chunked); a chunked or
//!   length-less answer, a malformed head, a head over 16 KiB or a body over the configured limit
//!   is an error, never a hang;
//! * `Connection: close` from the server, or any error, closes the connection; the caller opens a
//!   new one ([`Conn::connect`]).

use std::io;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest response head accepted.
const MAX_HEAD: usize = 16 * 1024;
/// Headers parsed per response.
const MAX_HEADERS: usize = 32;

/// A failure of one exchange; the connection must be dropped after any of them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Socket error (including the server closing the connection).
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    /// The answer is not HTTP/1.1 this connection understands.
    #[error("bad answer: {0}")]
    Protocol(String),
}

/// An HTTP answer: status, the draw ticket if any, and the whole body.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// The `Privfed-Ticket` header (a draw's single-use ticket), if present.
    pub ticket: Option<String>,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// One keep-alive connection (see the [module documentation](self)).
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    host: String,
    /// Bytes read past the end of the previous answer (never expected, kept for correctness).
    buf: Vec<u8>,
    max_body: usize,
    out: Vec<u8>,
    closed: bool,
}

impl Conn {
    /// Connects to `addr` (`HOST:PORT`), with `TCP_NODELAY`; answers larger than `max_body`
    /// bytes are refused.
    pub async fn connect(addr: &str, max_body: usize) -> Result<Self, WireError> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            host: addr.to_string(),
            buf: Vec::with_capacity(8192),
            max_body,
            out: Vec::with_capacity(8192),
            closed: false,
        })
    }

    /// Whether the server asked to close the connection after the last answer.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Sends `METHOD path` with the given extra header lines (each `Name: value`, no CRLF) and
    /// body, and reads the whole answer.
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[&str],
        body: &[u8],
    ) -> Result<Answer, WireError> {
        if self.closed {
            return Err(WireError::Protocol(
                "connection closed by the server".into(),
            ));
        }
        self.out.clear();
        self.out.extend_from_slice(method.as_bytes());
        self.out.push(b' ');
        self.out.extend_from_slice(path.as_bytes());
        self.out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        self.out.extend_from_slice(self.host.as_bytes());
        self.out.extend_from_slice(b"\r\n");
        for h in headers {
            self.out.extend_from_slice(h.as_bytes());
            self.out.extend_from_slice(b"\r\n");
        }
        if !body.is_empty() || method == "POST" || method == "PUT" {
            self.out.extend_from_slice(b"Content-Length: ");
            self.out
                .extend_from_slice(body.len().to_string().as_bytes());
            self.out.extend_from_slice(b"\r\n");
        }
        self.out.extend_from_slice(b"\r\n");
        self.out.extend_from_slice(body);
        self.stream.write_all(&self.out).await?;
        self.read_answer().await
    }

    async fn fill(&mut self) -> Result<(), WireError> {
        let mut chunk = [0u8; 8192];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(WireError::Io(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            )));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    async fn read_answer(&mut self) -> Result<Answer, WireError> {
        let (head_len, status, content_length, ticket) = loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut resp = httparse::Response::new(&mut headers);
            match resp.parse(&self.buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let status = resp
                        .code
                        .ok_or_else(|| WireError::Protocol("no status".into()))?;
                    let mut len = None;
                    let mut ticket = None;
                    for h in resp.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            let v = std::str::from_utf8(h.value)
                                .ok()
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .ok_or_else(|| WireError::Protocol("bad Content-Length".into()))?;
                            len = Some(v);
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            return Err(WireError::Protocol(
                                "chunked answers are not supported".into(),
                            ));
                        } else if h.name.eq_ignore_ascii_case("privfed-ticket") {
                            ticket = std::str::from_utf8(h.value).ok().map(str::to_string);
                        } else if h.name.eq_ignore_ascii_case("connection")
                            && h.value.eq_ignore_ascii_case(b"close")
                        {
                            self.closed = true;
                        }
                    }
                    let len = len.ok_or_else(|| WireError::Protocol("no Content-Length".into()))?;
                    break (n, status, len, ticket);
                }
                Ok(httparse::Status::Partial) => {
                    if self.buf.len() > MAX_HEAD {
                        return Err(WireError::Protocol("response head too large".into()));
                    }
                    self.fill().await?;
                }
                Err(e) => return Err(WireError::Protocol(e.to_string())),
            }
        };
        if content_length > self.max_body {
            return Err(WireError::Protocol(format!(
                "answer of {content_length} bytes exceeds the limit of {}",
                self.max_body
            )));
        }
        let total = head_len + content_length;
        if self.buf.len() < total {
            self.buf.reserve(total - self.buf.len());
            while self.buf.len() < total {
                self.fill().await?;
            }
        }
        let body = self.buf[head_len..total].to_vec();
        self.buf.drain(..total);
        Ok(Answer {
            status,
            ticket,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A scripted server: answers each request on one connection with the next canned bytes.
    async fn scripted(answers: Vec<Vec<u8>>) -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = vec![0u8; 65536];
            for a in answers {
                // Read one request head (+ body, small) before answering.
                let _ = s.read(&mut buf).await.unwrap();
                // Send in two pieces to exercise partial reads.
                let mid = a.len() / 2;
                s.write_all(&a[..mid]).await.unwrap();
                s.flush().await.unwrap();
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                s.write_all(&a[mid..]).await.unwrap();
            }
        });
        addr
    }

    #[tokio::test]
    async fn reads_content_length_bodies_in_pieces_and_keeps_alive() {
        let addr = scripted(vec![
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nPrivfed-Ticket: 00ff\r\n\r\nhello".to_vec(),
            b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}".to_vec(),
        ])
        .await;
        let mut c = Conn::connect(&addr, 1024).await.unwrap();
        let a = c.request("GET", "/x", &[], &[]).await.unwrap();
        assert_eq!(
            a,
            Answer {
                status: 200,
                ticket: Some("00ff".into()),
                body: b"hello".to_vec()
            }
        );
        let a = c
            .request("POST", "/y", &["Content-Type: a/b"], b"123")
            .await
            .unwrap();
        assert_eq!(
            a,
            Answer {
                status: 202,
                ticket: None,
                body: b"{}".to_vec()
            }
        );
        assert!(!c.is_closed());
    }

    #[tokio::test]
    async fn refuses_chunked_missing_length_oversized_and_eof() {
        for (answer, want) in [
            (
                &b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"[..],
                "chunked",
            ),
            (&b"HTTP/1.1 200 OK\r\nx: y\r\n\r\n"[..], "no Content-Length"),
            (
                &b"HTTP/1.1 200 OK\r\ncontent-length: 99999\r\n\r\n"[..],
                "exceeds",
            ),
            (&b"garbage\r\n\r\n"[..], "bad answer"),
        ] {
            let addr = scripted(vec![answer.to_vec()]).await;
            let mut c = Conn::connect(&addr, 1024).await.unwrap();
            let e = c
                .request("GET", "/", &[], &[])
                .await
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e} should mention {want}");
        }
        // The server closes without answering.
        let addr = scripted(vec![]).await;
        let mut c = Conn::connect(&addr, 1024).await.unwrap();
        assert!(matches!(
            c.request("GET", "/", &[], &[]).await,
            Err(WireError::Io(_))
        ));
    }

    #[tokio::test]
    async fn connection_close_is_honoured() {
        let addr = scripted(vec![
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n".to_vec(),
        ])
        .await;
        let mut c = Conn::connect(&addr, 1024).await.unwrap();
        assert_eq!(c.request("GET", "/", &[], &[]).await.unwrap().status, 200);
        assert!(c.is_closed());
        assert!(c.request("GET", "/", &[], &[]).await.is_err());
    }
}
