//! One register holding an optional integer: read, write (None deletes), compare-and-set.
//! The model of the Jepsen etcd histories, and of one key of the concrete store.

use super::SeqModel;

/// An absent value is `None`; the register starts absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Register;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegisterInput {
    Read,
    /// Write the value; `Write(None)` deletes it.
    Write(Option<u64>),
    /// Set `to` if the current value is `from`; no effect otherwise.
    Cas {
        from: Option<u64>,
        to: Option<u64>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RegisterOutput {
    /// The value read.
    Read(Option<u64>),
    WriteOk,
    /// The compare held and the value was set.
    CasOk,
    /// The compare failed; nothing changed.
    CasFail,
}

impl SeqModel for Register {
    type State = Option<u64>;
    type Input = RegisterInput;
    type Output = RegisterOutput;

    fn init(&self) -> Option<u64> {
        None
    }

    fn step(
        &self,
        state: &Option<u64>,
        input: &RegisterInput,
        output: &RegisterOutput,
    ) -> Option<Option<u64>> {
        match (input, output) {
            (RegisterInput::Read, RegisterOutput::Read(value)) => (value == state).then_some(*state),
            (RegisterInput::Write(value), RegisterOutput::WriteOk) => Some(*value),
            (RegisterInput::Cas { from, to }, RegisterOutput::CasOk) => (state == from).then_some(*to),
            (RegisterInput::Cas { from, .. }, RegisterOutput::CasFail) => (state != from).then_some(*state),
            // An output of another kind of operation: not a history this model can explain.
            _ => None,
        }
    }

    fn apply(&self, state: &Option<u64>, input: &RegisterInput) -> Option<u64> {
        match input {
            RegisterInput::Read => *state,
            RegisterInput::Write(value) => *value,
            RegisterInput::Cas { from, to } => {
                if state == from {
                    *to
                } else {
                    *state
                }
            }
        }
    }

    fn is_read_only(&self, input: &RegisterInput) -> bool {
        matches!(input, RegisterInput::Read)
    }
}
