//! XML as a strict consumer reads it: XML 1.0 characters only, and the
//! elements, attributes and text a JUnit reporter takes.

use crate::junit::system_out;
use crate::model::Scope;
use crate::output::xml_safe;
use crate::result::RunReport;
use crate::verdict::Status;
use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// Whether XML 1.0 allows `c` anywhere in a document.
pub(crate) fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Reads `xml` to the end as a strict consumer would: only XML 1.0
/// characters (quick-xml does not check them), balanced elements,
/// attributes and references that resolve.
pub(crate) fn well_formed(xml: &str) -> Result<(), String> {
    if let Some((at, c)) = xml.char_indices().find(|&(_, c)| !is_xml_char(c)) {
        return Err(format!(
            "U+{:04X} at byte {at} is not an XML 1.0 character",
            c as u32
        ));
    }
    let mut reader = Reader::from_str(xml);
    let mut depth = 0usize;
    loop {
        let event = reader.read_event().map_err(|e| e.to_string())?;
        let attributes = |e: &BytesStart<'_>| -> Result<(), String> {
            for a in e.attributes() {
                a.map_err(|e| e.to_string())?
                    .normalized_value(quick_xml::XmlVersion::Explicit1_0)
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        };
        match event {
            Event::Eof => break,
            Event::Start(e) => {
                depth += 1;
                attributes(&e)?;
            }
            Event::Empty(e) => attributes(&e)?,
            Event::End(_) => depth = depth.checked_sub(1).ok_or("unbalanced end tag")?,
            Event::Text(t) => {
                t.decode().map_err(|e| e.to_string())?;
            }
            Event::GeneralRef(r) => {
                let known = r.is_char_ref()
                    && r.resolve_char_ref().map_err(|e| e.to_string())?.is_some()
                    || quick_xml::escape::resolve_predefined_entity(
                        &r.decode().map_err(|e| e.to_string())?,
                    )
                    .is_some();
                if !known {
                    return Err(format!("unknown reference {r:?}"));
                }
            }
            _ => {}
        }
    }
    if depth == 0 {
        Ok(())
    } else {
        Err(format!("{depth} elements left open"))
    }
}

/// One element of a JUnit document as a reader sees it: the element's
/// name, the attributes a test compares and its text.
pub(crate) type Seen = (String, Vec<(String, String)>, String);

/// XML 1.0 end-of-line handling, which every reader applies to text.
pub(crate) fn eol(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n")
}

/// XML 1.0 attribute-value normalisation: tabs and line ends become
/// spaces in whatever reads the document.
pub(crate) fn attr(s: &str) -> String {
    eol(s).replace(['\t', '\n'], " ")
}

/// What a conforming reader takes from `xml`: each `testsuite`,
/// `property`, `testcase`, `failure`, `error`, `skipped` and `system-out`
/// in document order, with the attributes that carry report text
/// (normalised) and the text (line ends normalised, references resolved).
pub(crate) fn read_back(xml: &str) -> Result<Vec<Seen>, String> {
    // Element, attributes compared, whether its text is (the others
    // hold only elements and the indentation between them).
    const KEEP: [(&str, &[&str], bool); 7] = [
        ("testsuite", &["name"], false),
        ("property", &["name", "value"], false),
        ("testcase", &["name", "classname"], false),
        ("failure", &["message", "type"], true),
        ("error", &["message", "type"], true),
        ("skipped", &["message", "type"], true),
        ("system-out", &[], true),
    ];
    let mut reader = Reader::from_str(xml);
    let mut seen: Vec<Seen> = Vec::new();
    // Index in `seen` of each open element whose text is kept; None for
    // the others.
    let mut open: Vec<Option<usize>> = Vec::new();
    let e = |e: &dyn std::fmt::Display| e.to_string();
    loop {
        let event = reader.read_event().map_err(|x| e(&x))?;
        let text = match &event {
            Event::Eof => break,
            Event::Start(start) | Event::Empty(start) => {
                let name = String::from_utf8_lossy(start.name().as_ref()).into_owned();
                let mut kept = None;
                if let Some((_, wanted, has_text)) = KEEP.iter().find(|(n, ..)| *n == name) {
                    let mut attrs = Vec::new();
                    for a in start.attributes() {
                        let a = a.map_err(|x| e(&x))?;
                        let key = String::from_utf8_lossy(a.key.as_ref()).into_owned();
                        if wanted.contains(&key.as_str()) {
                            let value = a
                                .normalized_value(quick_xml::XmlVersion::Explicit1_0)
                                .map_err(|x| e(&x))?;
                            attrs.push((key, value.into_owned()));
                        }
                    }
                    attrs.sort();
                    seen.push((name, attrs, String::new()));
                    kept = has_text.then_some(seen.len() - 1);
                }
                if matches!(event, Event::Start(_)) {
                    open.push(kept);
                }
                continue;
            }
            Event::End(_) => {
                open.pop();
                continue;
            }
            Event::Text(t) => t
                .xml_content(quick_xml::XmlVersion::Explicit1_0)
                .map_err(|x| e(&x))?
                .into_owned(),
            Event::CData(t) => eol(&t.decode().map_err(|x| e(&x))?),
            Event::GeneralRef(r) => match r.resolve_char_ref().map_err(|x| e(&x))? {
                Some(c) => c.to_string(),
                None => {
                    quick_xml::escape::resolve_predefined_entity(&r.decode().map_err(|x| e(&x))?)
                        .ok_or_else(|| format!("unknown reference {r:?}"))?
                        .to_string()
                }
            },
            _ => continue,
        };
        if let Some(Some(i)) = open.last() {
            seen[*i].2.push_str(&text);
        }
    }
    Ok(seen)
}

/// What `read_back` must find in the rendering of `report`, each string
/// passed through `clean` (how render cleans it) and then normalised as
/// XML readers do.
pub(crate) fn expected(
    report: &RunReport,
    node: &[(String, String)],
    clean: fn(&str) -> String,
) -> Vec<Seen> {
    let kv = |pairs: &[(&str, String)]| {
        let mut v: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), attr(&clean(v))))
            .collect();
        v.sort();
        v
    };
    let el = |name: &str, attrs: Vec<(String, String)>, text: &str| {
        (name.to_string(), attrs, eol(&clean(text)))
    };
    let mut want = Vec::new();
    // The node's name, when given, prefixes suites and classnames, its
    // dots made underscores.
    let hostname = node.iter().find(|(k, _)| k == super::KEYS.host);
    let prefix = hostname
        .map(|(_, v)| xml_safe(v))
        .filter(|v| !v.trim().is_empty())
        .map_or_else(String::new, |n| format!("{}.", n.trim().replace('.', "_")));
    for scope in report.scope_list() {
        want.push(el(
            "testsuite",
            kv(&[("name", format!("{prefix}{}", scope.label()))]),
            "",
        ));
        let mut props: Vec<(String, String)> = Vec::new();
        if scope == Scope::Node {
            props.extend(node.iter().cloned());
        } else if let Some(h) = hostname {
            props.push(h.clone());
        }
        props.extend(report.scope_info(scope).properties);
        props.push((
            "first_failing_layer".into(),
            report
                .first_failing_layer(Some(scope))
                .map_or("none", |l| l.as_str())
                .into(),
        ));
        if let Some(why) = &report.interrupted {
            props.push(("interrupted".into(), why.clone()));
        }
        for (k, v) in props {
            want.push(el("property", kv(&[("name", k), ("value", v)]), ""));
        }
        for r in report.results.iter().filter(|r| r.scope == scope) {
            let classname = format!("{prefix}{}.{}", r.scope.label(), r.layer);
            want.push(el(
                "testcase",
                kv(&[("name", r.name().to_string()), ("classname", classname)]),
                "",
            ));
            let first = r
                .message
                .split_once('\n')
                .map_or(r.message.as_str(), |(f, _)| f);
            match r.status {
                _ if r.waived() => {
                    let w = r.waiver.as_ref().unwrap();
                    let until = w
                        .expires
                        .as_ref()
                        .map_or_else(String::new, |d| format!("; until {d}"));
                    let seen = match &r.finding {
                        Some(f) => format!("{}: {first}", f.code),
                        None => first.to_string(),
                    };
                    let message = format!("waived ({}{until}; {}): {seen}", w.reason, w.source);
                    want.push(el(
                        "skipped",
                        kv(&[("message", message), ("type", "waived".into())]),
                        "",
                    ));
                }
                Status::Pass => {}
                Status::Warn if !report.fail_on_warn => {}
                Status::Fail | Status::Warn | Status::Timeout | Status::Crash => {
                    // The reporters' contract, spelled out: the code and
                    // the first line in the message, the next step on
                    // the body's second line.
                    let (first, rest) = r.message.split_once('\n').unwrap_or((&r.message, ""));
                    let (kind, message, text) = match &r.finding {
                        Some(f) => (
                            f.code.clone(),
                            format!("{}: {first}", f.code),
                            format!(
                                "{first}\nnext step: {}{}\ncode: {}",
                                f.next_step,
                                if rest.is_empty() {
                                    String::new()
                                } else {
                                    format!("\n{rest}")
                                },
                                f.code
                            ),
                        ),
                        None => (
                            r.status.as_str().to_string(),
                            first.to_string(),
                            r.message.clone(),
                        ),
                    };
                    let name = if r.status == Status::Crash {
                        "error"
                    } else {
                        "failure"
                    };
                    want.push(el(name, kv(&[("message", message), ("type", kind)]), &text));
                }
                Status::Blocked | Status::Skipped => {
                    let (message, kind) = match r.skip_reason {
                        Some(reason) => (format!("{reason}: {}", r.message), reason.as_str()),
                        None => (r.message.clone(), r.status.as_str()),
                    };
                    want.push(el(
                        "skipped",
                        kv(&[("message", message), ("type", kind.to_string())]),
                        "",
                    ));
                }
            }
            // The composition is `system_out`'s; what is tested here is
            // that the text survives XML and the consumers' parsers.
            let out = system_out(r);
            if !clean(&out).is_empty() {
                want.push(el("system-out", Vec::new(), &out));
            }
        }
    }
    want
}

/// How render cleans text: [`xml_safe`], then quick-junit's own
/// escape-sequence stripper, which also takes tabs and carriage returns
/// (XML would carry both; a reader turns the returns into line feeds).
pub(crate) fn junit_clean(s: &str) -> String {
    xml_safe(s).replace(['\t', '\r'], "")
}
