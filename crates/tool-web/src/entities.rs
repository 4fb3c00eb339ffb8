//! HTML character references: numeric ones and the named ones that occur in ordinary pages.

const NAMED: &[(&str, char)] = &[
    ("amp", '&'),
    ("lt", '<'),
    ("gt", '>'),
    ("quot", '"'),
    ("apos", '\''),
    ("nbsp", '\u{a0}'),
    ("shy", '\u{ad}'),
    ("copy", '©'),
    ("reg", '®'),
    ("trade", '™'),
    ("deg", '°'),
    ("plusmn", '±'),
    ("times", '×'),
    ("divide", '÷'),
    ("micro", 'µ'),
    ("para", '¶'),
    ("sect", '§'),
    ("middot", '·'),
    ("bull", '•'),
    ("hellip", '…'),
    ("ndash", '–'),
    ("mdash", '—'),
    ("lsquo", '‘'),
    ("rsquo", '’'),
    ("sbquo", '‚'),
    ("ldquo", '“'),
    ("rdquo", '”'),
    ("bdquo", '„'),
    ("laquo", '«'),
    ("raquo", '»'),
    ("lsaquo", '‹'),
    ("rsaquo", '›'),
    ("euro", '€'),
    ("pound", '£'),
    ("yen", '¥'),
    ("cent", '¢'),
    ("curren", '¤'),
    ("iexcl", '¡'),
    ("iquest", '¿'),
    ("ordf", 'ª'),
    ("ordm", 'º'),
    ("sup1", '¹'),
    ("sup2", '²'),
    ("sup3", '³'),
    ("frac14", '¼'),
    ("frac12", '½'),
    ("frac34", '¾'),
    ("larr", '←'),
    ("rarr", '→'),
    ("uarr", '↑'),
    ("darr", '↓'),
    ("harr", '↔'),
    ("le", '≤'),
    ("ge", '≥'),
    ("ne", '≠'),
    ("asymp", '≈'),
    ("infin", '∞'),
    ("minus", '−'),
    ("dagger", '†'),
    ("Dagger", '‡'),
    ("permil", '‰'),
    ("prime", '′'),
    ("Prime", '″'),
    ("thinsp", '\u{2009}'),
    ("ensp", '\u{2002}'),
    ("emsp", '\u{2003}'),
    ("zwnj", '\u{200c}'),
    ("zwj", '\u{200d}'),
    ("szlig", 'ß'),
    ("AElig", 'Æ'),
    ("aelig", 'æ'),
    ("Oslash", 'Ø'),
    ("oslash", 'ø'),
    ("Aring", 'Å'),
    ("aring", 'å'),
    ("Ccedil", 'Ç'),
    ("ccedil", 'ç'),
    ("Ntilde", 'Ñ'),
    ("ntilde", 'ñ'),
    ("ETH", 'Ð'),
    ("eth", 'ð'),
    ("THORN", 'Þ'),
    ("thorn", 'þ'),
];

/// Accented letters follow a regular naming scheme: base letter plus accent name.
const ACCENTS: &[(&str, &str, &str)] = &[
    ("acute", "AEIOUYaeiouy", "ÁÉÍÓÚÝáéíóúý"),
    ("grave", "AEIOUaeiou", "ÀÈÌÒÙàèìòù"),
    ("circ", "AEIOUaeiou", "ÂÊÎÔÛâêîôû"),
    ("uml", "AEIOUaeiouy", "ÄËÏÖÜäëïöüÿ"),
    ("tilde", "AOao", "ÃÕãõ"),
];

fn named(name: &str) -> Option<char> {
    if let Some((_, c)) = NAMED.iter().find(|(n, _)| *n == name) {
        return Some(*c);
    }
    let mut chars = name.chars();
    let base = chars.next()?;
    let accent = chars.as_str();
    let (_, bases, accented) = ACCENTS.iter().find(|(a, _, _)| *a == accent)?;
    let index = bases.chars().position(|b| b == base)?;
    accented.chars().nth(index)
}

fn numeric(body: &str) -> Option<char> {
    let code = if let Some(hex) = body.strip_prefix('x').or_else(|| body.strip_prefix('X')) {
        u32::from_str_radix(hex, 16).ok()?
    } else {
        body.parse::<u32>().ok()?
    };
    if code == 0 {
        return Some('\u{fffd}');
    }
    Some(char::from_u32(code).unwrap_or('\u{fffd}'))
}

/// Decodes `&name;`, `&#N;` and `&#xH;`; unknown references stay as written.
pub fn decode(input: &str) -> String {
    if !input.contains('&') {
        return input.to_owned();
    }
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('&') {
        out.push_str(&rest[..pos]);
        rest = &rest[pos..];
        let end = rest[1..]
            .char_indices()
            .take(33)
            .find(|(_, c)| !c.is_ascii_alphanumeric() && *c != '#')
            .map(|(i, c)| (i + 1, c));
        let decoded = match end {
            Some((i, ';')) => {
                let body = &rest[1..i];
                let c = match body.strip_prefix('#') {
                    Some(num) => numeric(num),
                    None => named(body),
                };
                c.map(|c| (c, i + 1))
            }
            _ => None,
        };
        match decoded {
            Some((c, used)) => {
                out.push(c);
                rest = &rest[used..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn decodes_named_numeric_and_accented_references() {
        assert_eq!(decode("Caf&eacute; &amp; &euro;2"), "Café & €2");
        assert_eq!(decode("&#65;&#x42;&#X43;"), "ABC");
        assert_eq!(decode("today&rsquo;s &mdash; x"), "today’s — x");
        assert_eq!(decode("&Uuml;ber"), "Über");
    }

    #[test]
    fn leaves_unknown_or_unterminated_references() {
        assert_eq!(decode("a & b"), "a & b");
        assert_eq!(decode("&bogus; &amp"), "&bogus; &amp");
    }
}
