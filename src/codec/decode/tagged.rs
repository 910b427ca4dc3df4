//! Tagged nodes: their members in any order (with `v` before `t` parsed
//! once), payloads, containers, attachments, and the values they build.

use super::*;

impl<'a> Parser<'a> {
    /// A tagged object: `{"t": ..., ...}`.
    pub(super) fn tagged(&mut self, depth: usize) -> Result<Value, CodecError> {
        let open = self.pos;
        self.pos += 1;
        let mut m = Members::default();
        self.ws();
        if self.peek() == Some(b'}') {
            return Err(CodecError::MissingTag { offset: open });
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("expected a member name"));
            }
            let key_at = self.pos;
            let key = self.str_token()?;
            self.expect(b':', "expected ':'")?;
            self.ws();
            let bit = match key.as_ref() {
                "t" => T,
                "v" => V,
                "dtype" => DTYPE,
                "shape" => SHAPE,
                "offset" => OFFSET,
                "length" => LENGTH,
                _ => {
                    return Err(CodecError::UnexpectedField {
                        tag: m.tag.map_or("?", Tag::name),
                        field: truncate(&key),
                    })
                }
            };
            if m.seen & bit != 0 {
                return Err(CodecError::DuplicateMember {
                    offset: key_at,
                    field: key.into_owned(),
                });
            }
            m.seen |= bit;
            if let Some(tag) = m.tag {
                if bit != T && tag.members() & bit == 0 {
                    return Err(CodecError::UnexpectedField {
                        tag: tag.name(),
                        field: key.into_owned(),
                    });
                }
            }
            let tag_name = m.tag.map_or("?", Tag::name);
            match bit {
                T => {
                    if self.peek() != Some(b'"') {
                        return Err(CodecError::BadField {
                            tag: "?",
                            field: "t",
                            reason: "must be a string",
                        });
                    }
                    let t = self.str_token()?;
                    let tag = Tag::parse(&t)
                        .ok_or_else(|| CodecError::UnknownTag { tag: truncate(&t) })?;
                    // Members that came before the tag must belong to it.
                    let extra = m.seen & !(T | tag.members());
                    if extra != 0 {
                        return Err(CodecError::UnexpectedField {
                            tag: tag.name(),
                            field: member_name(extra & extra.wrapping_neg()).to_string(),
                        });
                    }
                    m.tag = Some(tag);
                }
                V => match m.tag {
                    Some(tag) => m.v = Some(self.payload(tag, depth)?),
                    None => m.early_v = Some(self.early(depth)?),
                },
                DTYPE => {
                    if self.peek() != Some(b'"') {
                        return Err(CodecError::BadField {
                            tag: tag_name,
                            field: "dtype",
                            reason: "must be a string",
                        });
                    }
                    let s = self.str_token()?;
                    m.dtype = Some((DType::parse(&s)?, s));
                }
                SHAPE => m.shape = Some(self.shape(tag_name)?),
                OFFSET => m.offset = Some(self.uint_member(tag_name, "offset")?),
                _ => m.length = Some(self.uint_member(tag_name, "length")?),
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.err("expected ',' or '}'")),
            }
        }
        let Some(tag) = m.tag else {
            return Err(CodecError::MissingTag { offset: open });
        };
        let missing = tag.members() & !m.seen;
        if missing != 0 {
            return Err(CodecError::MissingField {
                tag: tag.name(),
                field: member_name(missing & missing.wrapping_neg()),
            });
        }
        if let Some(early) = m.early_v.take() {
            m.v = Some(self.apply_early(tag, early, depth)?);
        }
        self.build(tag, m)
    }

    /// A `v` member met before the tag: parsed once, in the shape its first
    /// byte announces (no container is ever skipped and parsed again).
    pub(super) fn early(&mut self, depth: usize) -> Result<Early, CodecError> {
        self.ws();
        let at = self.pos;
        match self.peek() {
            Some(b'[') => {
                let mut i = at + 1;
                while matches!(self.src.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                    i += 1;
                }
                match self.src.get(i) {
                    Some(b']') => {
                        self.pos = i + 1;
                        Ok(Early::Empty { at })
                    }
                    Some(b'[') => Ok(Early::Entries {
                        at,
                        dict: self.dict_entries(depth)?,
                    }),
                    _ => Ok(Early::Items {
                        at,
                        first: i,
                        items: self.items(Tag::List, depth)?,
                    }),
                }
            }
            Some(b'{') => Ok(Early::Object {
                value: self.value(depth + 1)?,
            }),
            _ => {
                // A scalar: validated now, parsed again (once) with its tag.
                self.skip(0)?;
                Ok(Early::Scalar { at })
            }
        }
    }

    /// Checks an early `v` against the tag that followed it; the errors are
    /// those the tag's own parser gives for the same text.
    pub(super) fn apply_early(
        &mut self,
        tag: Tag,
        early: Early,
        depth: usize,
    ) -> Result<Value, CodecError> {
        let not_array = |tag: Tag| CodecError::BadField {
            tag: tag.name(),
            field: "v",
            reason: if tag == Tag::Dict {
                "must be a JSON array of [key, value] pairs"
            } else {
                "must be a JSON array"
            },
        };
        match (tag, early) {
            (_, Early::Scalar { at }) => {
                let resume = self.pos;
                self.pos = at;
                let v = self.payload(tag, depth);
                self.pos = resume;
                v
            }
            (Tag::Float, _) => Err(CodecError::BadField {
                tag: "float",
                field: "v",
                reason: "must be \"nan\", \"inf\" or \"-inf\"",
            }),
            (Tag::Graph, Early::Object { value, .. }) => Ok(value),
            (
                Tag::Graph,
                Early::Empty { at } | Early::Items { at, .. } | Early::Entries { at, .. },
            ) => Err(CodecError::BareArray { offset: at }),
            (_, Early::Object { .. }) => Err(not_array(tag)),
            (Tag::Dict, Early::Empty { .. }) => Ok(Value::Dict(Dict::new())),
            (Tag::Dict, Early::Entries { dict, .. }) => Ok(Value::Dict(dict)),
            (Tag::Dict, Early::Items { first, .. }) => {
                Err(CodecError::BadDictEntry { offset: first })
            }
            (Tag::Tuple, Early::Empty { .. }) => Ok(Value::Tuple(Vec::new())),
            (Tag::Tuple, Early::Items { items, .. }) => Ok(Value::Tuple(items)),
            (_, Early::Empty { .. }) => Ok(Value::List(Vec::new())),
            (_, Early::Items { items, .. }) => Ok(Value::List(items)),
            (_, Early::Entries { at, .. }) => {
                // The first entry is a bare JSON array inside a list.
                let mut i = at + 1;
                while matches!(self.src.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                    i += 1;
                }
                Err(CodecError::BareArray { offset: i })
            }
        }
    }

    /// The `v` member of a tagged node.
    pub(super) fn payload(&mut self, tag: Tag, depth: usize) -> Result<Value, CodecError> {
        self.ws();
        match tag {
            Tag::Float => {
                if self.peek() != Some(b'"') {
                    return Err(CodecError::BadField {
                        tag: "float",
                        field: "v",
                        reason: "must be \"nan\", \"inf\" or \"-inf\"",
                    });
                }
                let s = self.str_token()?;
                Ok(Value::Float(match s.as_ref() {
                    "nan" => f64::NAN,
                    "inf" => f64::INFINITY,
                    "-inf" => f64::NEG_INFINITY,
                    _ => {
                        return Err(CodecError::BadField {
                            tag: "float",
                            field: "v",
                            reason: "must be \"nan\", \"inf\" or \"-inf\"",
                        })
                    }
                }))
            }
            Tag::List | Tag::Tuple | Tag::ObjectArray => {
                let items = self.items(tag, depth)?;
                Ok(if tag == Tag::Tuple {
                    Value::Tuple(items)
                } else {
                    Value::List(items)
                })
            }
            Tag::Dict => self.dict_entries(depth).map(Value::Dict),
            Tag::Graph => {
                let fields = self.value(depth + 1)?;
                Ok(fields)
            }
            Tag::Bytes | Tag::Array => Err(CodecError::UnexpectedField {
                tag: tag.name(),
                field: "v".into(),
            }),
        }
    }

    pub(super) fn items(&mut self, tag: Tag, depth: usize) -> Result<Vec<Value>, CodecError> {
        if self.peek() != Some(b'[') {
            return Err(CodecError::BadField {
                tag: tag.name(),
                field: "v",
                reason: "must be a JSON array",
            });
        }
        self.pos += 1;
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(items);
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(items);
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    pub(super) fn dict_entries(&mut self, depth: usize) -> Result<Dict, CodecError> {
        if self.peek() != Some(b'[') {
            return Err(CodecError::BadField {
                tag: "dict",
                field: "v",
                reason: "must be a JSON array of [key, value] pairs",
            });
        }
        self.pos += 1;
        let mut dict = Dict::new();
        // Linear duplicate checks for small dicts, a hash set past that.
        let mut index: Option<HashSet<String>> = None;
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(dict);
        }
        loop {
            self.ws();
            let entry_at = self.pos;
            if self.peek() != Some(b'[') {
                return Err(CodecError::BadDictEntry { offset: entry_at });
            }
            self.pos += 1;
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(CodecError::BadDictEntry { offset: entry_at });
            }
            let key = self.string()?;
            self.grow(ENTRY_BYTES)?;
            let duplicate = match index.as_mut() {
                Some(set) => !set.insert(key.clone()),
                None => {
                    let dup = dict.contains_key(&key);
                    if dict.len() >= 16 {
                        index = Some(
                            dict.keys()
                                .map(str::to_owned)
                                .chain([key.clone()])
                                .collect(),
                        );
                    }
                    dup
                }
            };
            if duplicate {
                return Err(CodecError::DuplicateKey {
                    key: truncate(&key),
                });
            }
            self.ws();
            if self.peek() != Some(b',') {
                return Err(CodecError::BadDictEntry { offset: entry_at });
            }
            self.pos += 1;
            let value = self.value(depth + 1)?;
            self.ws();
            if self.peek() != Some(b']') {
                return Err(CodecError::BadDictEntry { offset: entry_at });
            }
            self.pos += 1;
            dict.push_unique(key, value);
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(dict);
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    /// A raw JSON array of at most 32 non-negative integers.
    pub(super) fn shape(&mut self, tag: &'static str) -> Result<Vec<usize>, CodecError> {
        if self.peek() != Some(b'[') {
            return Err(CodecError::BadField {
                tag,
                field: "shape",
                reason: "must be a JSON array of integers",
            });
        }
        self.pos += 1;
        let mut shape = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(shape);
        }
        loop {
            self.ws();
            let at = self.pos;
            if !matches!(self.peek(), Some(b'-' | b'0'..=b'9')) {
                return Err(CodecError::BadDimension { offset: at });
            }
            match self.number()? {
                Value::Int(i) if i >= 0 => {
                    if shape.len() == MAX_DIMS {
                        return Err(CodecError::TooManyDims { ndim: MAX_DIMS + 1 });
                    }
                    shape.push(i as usize);
                }
                _ => return Err(CodecError::BadDimension { offset: at }),
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(shape);
                }
                _ => return Err(self.err("expected ',' or ']'")),
            }
        }
    }

    /// Claims the next attachment: it must start exactly where the previous
    /// one ended and fit in the attachment section.
    pub(super) fn attachment(&mut self, offset: usize, length: usize) -> Result<Bytes, CodecError> {
        if offset != self.cursor {
            return Err(CodecError::AttachmentOrder {
                expected: self.cursor,
                offset,
            });
        }
        if length > self.attach_len - offset {
            return Err(CodecError::AttachmentOutOfBounds {
                offset,
                length,
                available: self.attach_len,
            });
        }
        self.cursor += length;
        let start = self.attach_base + offset;
        Ok(self.frame.slice(start..start + length))
    }

    pub(super) fn build(&mut self, tag: Tag, m: Members<'_>) -> Result<Value, CodecError> {
        match tag {
            Tag::Float | Tag::List | Tag::Tuple | Tag::Dict => Ok(m.v.unwrap_or_default()),
            Tag::Graph => match m.v {
                Some(Value::Dict(d)) => graph_from(d),
                _ => Err(CodecError::GraphFields),
            },
            Tag::ObjectArray => {
                let shape = m.shape.unwrap_or_default();
                let values = match m.v {
                    Some(Value::List(v)) => v,
                    _ => Vec::new(),
                };
                let count = element_count(&shape);
                if count
                    .and_then(|n| n.checked_mul(8))
                    .is_none_or(|bytes| bytes > self.max_message_size)
                {
                    return Err(CodecError::ObjectArrayTooLarge { shape });
                }
                if count != Some(values.len()) {
                    return Err(CodecError::ObjectArrayCount {
                        shape,
                        actual: values.len(),
                    });
                }
                Ok(Value::ObjectArray(ObjectArray::new_unchecked(
                    shape, values,
                )))
            }
            Tag::Bytes => {
                let data = self.attachment(m.offset.unwrap_or(0), m.length.unwrap_or(0))?;
                Ok(Value::Bytes(data))
            }
            Tag::Array => {
                let (dtype, dtype_str) = m.dtype.unwrap_or((DType::U8, Cow::Borrowed("")));
                let shape = m.shape.unwrap_or_default();
                let (offset, length) = (m.offset.unwrap_or(0), m.length.unwrap_or(0));
                let expected = element_count(&shape)
                    .and_then(|n| n.checked_mul(dtype.itemsize()))
                    .ok_or_else(|| CodecError::SizeOverflow {
                        shape: shape.clone(),
                        itemsize: dtype.itemsize(),
                    })?;
                if expected != length {
                    return Err(CodecError::LengthMismatch {
                        dtype: dtype_str.into_owned(),
                        shape,
                        expected,
                        length,
                    });
                }
                let data = self.attachment(offset, length)?;
                Ok(Value::Array(NdArray::from_bytes(dtype, shape, data)?))
            }
        }
    }
}

fn graph_from(d: Dict) -> Result<Value, CodecError> {
    if d.len() != 5 || !Graph::FIELDS.iter().all(|f| d.contains_key(f)) {
        return Err(CodecError::GraphFields);
    }
    let mut g = Graph::default();
    for (k, v) in d {
        match k.as_str() {
            "n_nodes" => g.n_nodes = v,
            "n_edges" => g.n_edges = v,
            "nodes_features" => g.nodes_features = v,
            "edges_features" => g.edges_features = v,
            _ => g.edges = v,
        }
    }
    Ok(Value::Graph(Box::new(g)))
}
