//! `server_audio_users[].ifb`: an output that feeds a presenter's earpiece (interruptible
//! foldback). It plays the program, and while anyone talks on the interrupt group the program
//! dips by `dimDb` (or is cut) and the talk is mixed in. bridged does it in the card's clock
//! (`bridged/src/mix.rs`).
//!
//! ```yaml
//! ifb: { program: 0, interrupt: director, dimDb: -20 }   # program from card input 0
//! ifb: { program: show, interrupt: director, dimDb: cut } # program from the group `show`
//! ```

use serde::{Deserialize, Serialize};

use super::Channel;

/// The dip when `dimDb` is not given.
pub const DEFAULT_IFB_DIM_DB: i32 = -20;
/// The deepest dip in dB short of a cut.
pub const MIN_IFB_DIM_DB: i32 = -60;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ifb {
    /// What the output plays between interruptions.
    pub program: IfbProgram,
    /// The group whose talk interrupts the program (a group id).
    #[cfg_attr(feature = "openapi", schema(example = "director"))]
    pub interrupt: String,
    /// How far the program dips while the interrupt group talks.
    #[serde(default)]
    pub dim_db: IfbDim,
}

/// An IFB's program: a card input channel (`program: 0`), or a group's sound (`program: show`:
/// its room's mix and its server users' inputs, usually a program group).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "NumberOrWord", into = "NumberOrWord")]
pub enum IfbProgram {
    Input(Channel),
    Group(String),
}

/// How far an IFB's program dips: a level in dB ([`MIN_IFB_DIM_DB`] to 0), or `cut`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "NumberOrWord", into = "NumberOrWord")]
pub enum IfbDim {
    Db(i32),
    Cut,
}

impl Default for IfbDim {
    fn default() -> Self {
        IfbDim::Db(DEFAULT_IFB_DIM_DB)
    }
}

impl IfbDim {
    /// The program's gain while interrupted: 0 for a cut.
    #[allow(clippy::cast_precision_loss, reason = "a dip of -60..0 dB")]
    pub fn gain(self) -> f32 {
        match self {
            IfbDim::Db(db) => 10f32.powf(db as f32 / 20.0),
            IfbDim::Cut => 0.0,
        }
    }
}

/// Either spelling of [`IfbProgram`] and [`IfbDim`] in the file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum NumberOrWord {
    Number(i64),
    Word(String),
}

impl TryFrom<NumberOrWord> for IfbProgram {
    type Error = String;
    fn try_from(value: NumberOrWord) -> Result<Self, String> {
        match value {
            NumberOrWord::Number(n) => u64::try_from(n)
                .ok()
                .and_then(|n| Channel::try_from(n).ok())
                .map(IfbProgram::Input)
                .ok_or_else(|| format!("input {n} is out of range: expected {}", Channel::EXPECTED)),
            NumberOrWord::Word(group) => Ok(IfbProgram::Group(group)),
        }
    }
}

impl From<IfbProgram> for NumberOrWord {
    fn from(value: IfbProgram) -> Self {
        match value {
            IfbProgram::Input(channel) => NumberOrWord::Number(channel.get().into()),
            IfbProgram::Group(group) => NumberOrWord::Word(group),
        }
    }
}

impl TryFrom<NumberOrWord> for IfbDim {
    type Error = String;
    fn try_from(value: NumberOrWord) -> Result<Self, String> {
        let expected = || format!("{MIN_IFB_DIM_DB} to 0 dB, or \"cut\"");
        match value {
            NumberOrWord::Number(db) if (i64::from(MIN_IFB_DIM_DB)..=0).contains(&db) => {
                Ok(IfbDim::Db(i32::try_from(db).map_err(|_| expected())?))
            }
            NumberOrWord::Word(word) if word == "cut" => Ok(IfbDim::Cut),
            NumberOrWord::Number(db) => Err(format!("{db} dB: expected {}", expected())),
            NumberOrWord::Word(word) => Err(format!("{word:?}: expected {}", expected())),
        }
    }
}

impl From<IfbDim> for NumberOrWord {
    fn from(value: IfbDim) -> Self {
        match value {
            IfbDim::Db(db) => NumberOrWord::Number(db.into()),
            IfbDim::Cut => NumberOrWord::Word("cut".to_owned()),
        }
    }
}

/// The schemas of the two spellings, for the API's document.
#[cfg(feature = "openapi")]
mod schema {
    use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
    use utoipa::openapi::{RefOr, schema::SchemaType};

    use super::{DEFAULT_IFB_DIM_DB, IfbDim, IfbProgram, MIN_IFB_DIM_DB};

    fn one_of(number: ObjectBuilder, word: ObjectBuilder, description: &str) -> RefOr<Schema> {
        let number = number.schema_type(SchemaType::new(Type::Integer));
        let word = word.schema_type(SchemaType::new(Type::String));
        OneOfBuilder::new().item(number).item(word).description(Some(description)).into()
    }

    impl utoipa::PartialSchema for IfbProgram {
        fn schema() -> RefOr<Schema> {
            one_of(
                ObjectBuilder::new().minimum(Some(0)).maximum(Some(7)),
                ObjectBuilder::new(),
                "a card input channel (0..=7), or a group id (its room's mix and its server users' inputs)",
            )
        }
    }
    impl utoipa::ToSchema for IfbProgram {}

    impl utoipa::PartialSchema for IfbDim {
        fn schema() -> RefOr<Schema> {
            let description =
                format!("the program's level while interrupted: dB (default {DEFAULT_IFB_DIM_DB}), or \"cut\"");
            one_of(
                ObjectBuilder::new().minimum(Some(MIN_IFB_DIM_DB)).maximum(Some(0)),
                ObjectBuilder::new().enum_values(Some(["cut"])),
                &description,
            )
        }
    }
    impl utoipa::ToSchema for IfbDim {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<Ifb, String> {
        crate::yaml::from_str::<Ifb>(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn the_program_is_an_input_or_a_group_and_the_dip_a_level_or_a_cut() {
        type Expected = Result<(IfbProgram, IfbDim), &'static str>;
        let cases: [(&str, Expected); 7] = [
            ("{program: 3, interrupt: d}", Ok((IfbProgram::Input(Channel(3)), IfbDim::Db(-20)))),
            ("{program: show, interrupt: d, dimDb: cut}", Ok((IfbProgram::Group("show".into()), IfbDim::Cut))),
            ("{program: 0, interrupt: d, dimDb: -60}", Ok((IfbProgram::Input(Channel(0)), IfbDim::Db(-60)))),
            ("{program: 8, interrupt: d}", Err("input 8 is out of range")),
            ("{program: -1, interrupt: d}", Err("input -1 is out of range")),
            ("{program: 0, interrupt: d, dimDb: -61}", Err("-61 dB: expected -60 to 0 dB")),
            ("{program: 0, interrupt: d, dimDb: mute}", Err("\"mute\": expected")),
        ];
        for (yaml, expected) in cases {
            match (parse(yaml), expected) {
                (Ok(ifb), Ok((program, dim))) => assert_eq!((ifb.program, ifb.dim_db), (program, dim), "{yaml}"),
                (Err(error), Err(part)) => assert!(error.contains(part), "{yaml}: {error}"),
                (got, _) => panic!("{yaml}: {got:?}"),
            }
        }
        let ifb = parse("{program: show, interrupt: d, dimDb: cut}").expect("parses");
        let written = crate::yaml::to_string(&ifb).expect("writes");
        assert!(written.contains("program: show") && written.contains("dimDb: cut"), "{written}");
        assert!((IfbDim::Db(-20).gain() - 0.1).abs() < 1e-6 && IfbDim::Cut.gain() == 0.0);
    }
}
