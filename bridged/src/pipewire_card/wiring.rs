//! Which links bridged's node needs, worked out from the graph's nodes and ports as PipeWire's
//! registry lists them. A filter node is not linked by the session manager (WirePlumber links
//! streams, not filters), so bridged links its own ports: card channel k of the capture from the
//! input node's port at position k (its monitor port when the input is a sink's monitor), card
//! channel k of the playback into the output node's port at position k. Channel for channel, by
//! position name: `card.rs` opens a node natively only when it has exactly the card's positions.

use std::collections::BTreeMap;

use crate::mix::CHANNELS;

/// The card's channels as PipeWire's position names, in card order
/// ([`crate::card::CARD_POSITIONS`]).
pub const POSITIONS: [&str; CHANNELS] = ["FL", "FR", "FC", "LFE", "RL", "RR", "SL", "SR"];

/// A port as the registry describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    pub node: u32,
    pub output: bool,
    pub monitor: bool,
    /// `audio.channel`: its position (`FL`, …).
    pub channel: Option<String>,
    /// `port.name`.
    pub name: Option<String>,
}

/// A node to link to: its name, and whether the capture takes its monitor ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub node: String,
    pub monitor: bool,
}

/// What bridged's node does: capture from a node, play into one, or both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    pub capture: Option<Target>,
    pub playback: Option<Target>,
}

impl Wanted {
    /// How many links make the card complete: one per channel and direction.
    pub fn links(&self) -> usize {
        POSITIONS.len() * (usize::from(self.capture.is_some()) + usize::from(self.playback.is_some()))
    }
}

/// The name of bridged's own port for `position` in a direction.
pub fn port_name(capture: bool, position: &str) -> String {
    if capture { format!("capture_{position}") } else { format!("playback_{position}") }
}

/// A link: its output port and its input port (global ids), with their nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Link {
    pub output_node: u32,
    pub output_port: u32,
    pub input_node: u32,
    pub input_port: u32,
}

/// The nodes and ports the registry listed, kept up to date as they come and go.
#[derive(Debug, Default)]
pub struct Graph {
    nodes: BTreeMap<u32, String>,
    ports: BTreeMap<u32, PortInfo>,
}

impl Graph {
    pub fn add_node(&mut self, id: u32, name: &str) {
        self.nodes.insert(id, name.to_owned());
    }

    pub fn add_port(&mut self, id: u32, port: PortInfo) {
        self.ports.insert(id, port);
    }

    /// A node or port gone (ids of other objects are ignored).
    pub fn remove(&mut self, id: u32) {
        self.nodes.remove(&id);
        self.ports.remove(&id);
    }

    /// The links `wanted` needs for bridged's node `ours` that the graph has both ports for.
    pub fn links(&self, ours: u32, wanted: &Wanted) -> Vec<Link> {
        let mut links = Vec::new();
        for position in POSITIONS {
            if let Some(target) = &wanted.capture {
                let device = self.device_port(target, true, position);
                let own = self.own_port(ours, true, position);
                if let (Some((output_node, output_port)), Some(input_port)) = (device, own) {
                    links.push(Link { output_node, output_port, input_node: ours, input_port });
                }
            }
            if let Some(target) = &wanted.playback {
                let own = self.own_port(ours, false, position);
                let device = self.device_port(target, false, position);
                if let (Some(output_port), Some((input_node, input_port))) = (own, device) {
                    links.push(Link { output_node: ours, output_port, input_node, input_port });
                }
            }
        }
        links
    }

    /// The target's port at `position` that feeds the capture (an output, or a monitor port) or
    /// takes the playback (an input), with its node.
    fn device_port(&self, target: &Target, capture: bool, position: &str) -> Option<(u32, u32)> {
        self.ports.iter().find_map(|(&id, port)| {
            let on_target = self.nodes.get(&port.node).is_some_and(|name| *name == target.node);
            let right_way = if capture { port.output && port.monitor == target.monitor } else { !port.output };
            (on_target && right_way && port.channel.as_deref() == Some(position)).then_some((port.node, id))
        })
    }

    /// Bridged's own port at `position` for the capture (an input) or the playback (an output).
    fn own_port(&self, ours: u32, capture: bool, position: &str) -> Option<u32> {
        let name = port_name(capture, position);
        self.ports
            .iter()
            .find(|(_, port)| port.node == ours && port.output != capture && port.name.as_deref() == Some(&*name))
            .map(|(&id, _)| id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: u32 = 100;

    /// A graph with a sink `out` (inputs and monitor outputs), a source `mic` (outputs) and
    /// bridged's node with both directions.
    fn graph() -> Graph {
        let mut graph = Graph::default();
        graph.add_node(10, "out");
        graph.add_node(20, "mic");
        graph.add_node(OURS, "partyline-bridged");
        let port = |node, output, monitor, channel: &str, name: String| PortInfo {
            node,
            output,
            monitor,
            channel: Some(channel.to_owned()),
            name: Some(name),
        };
        for (k, position) in POSITIONS.iter().enumerate() {
            let k = u32::try_from(k).expect("eight");
            graph.add_port(200 + k, port(10, false, false, position, format!("playback_{position}")));
            graph.add_port(210 + k, port(10, true, true, position, format!("monitor_{position}")));
            graph.add_port(220 + k, port(20, true, false, position, format!("capture_{position}")));
            graph.add_port(300 + k, port(OURS, false, false, position, port_name(true, position)));
            graph.add_port(310 + k, port(OURS, true, false, position, port_name(false, position)));
        }
        graph
    }

    fn target(node: &str, monitor: bool) -> Option<Target> {
        Some(Target { node: node.into(), monitor })
    }

    #[test]
    fn the_positions_are_the_card_s() {
        assert_eq!(POSITIONS.join(","), crate::card::CARD_POSITIONS);
    }

    #[test]
    fn each_card_channel_is_linked_to_the_device_port_at_its_position() {
        let graph = graph();
        let cases = [
            // (capture, playback, the first link's ports, how many)
            (target("mic", false), None, (220, 300), 8),
            (target("out", true), None, (210, 300), 8),
            (None, target("out", false), (310, 200), 8),
        ];
        for (capture, playback, (first_out, first_in), count) in cases {
            let wanted = Wanted { capture, playback };
            let links = graph.links(OURS, &wanted);
            assert_eq!(links.len(), count, "{wanted:?}");
            assert_eq!(wanted.links(), count);
            assert_eq!((links[0].output_port, links[0].input_port), (first_out, first_in), "{wanted:?}");
            for (k, link) in links.iter().enumerate() {
                let k = u32::try_from(k).expect("eight");
                assert_eq!((link.output_port - first_out, link.input_port - first_in), (k, k), "channel {k}");
            }
        }
    }

    #[test]
    fn both_directions_link_in_card_order_and_a_port_gone_takes_its_link() {
        let mut graph = graph();
        let wanted = Wanted { capture: target("out", true), playback: target("out", false) };
        assert_eq!(graph.links(OURS, &wanted).len(), 16);
        graph.remove(212); // out's monitor_FC
        graph.remove(OURS + 300); // no such object: nothing happens
        let links = graph.links(OURS, &wanted);
        assert_eq!(links.len(), 15);
        assert!(!links.iter().any(|l| l.output_port == 212));
    }

    #[test]
    fn nothing_is_linked_to_a_node_that_is_not_there_or_to_another_node_s_ports() {
        let graph = graph();
        let wanted = Wanted { capture: target("nowhere", false), playback: target("mic", false) };
        // "mic" has no inputs; "nowhere" no ports; and a node id that is not ours has no ports.
        assert!(graph.links(OURS, &wanted).is_empty());
        assert!(graph.links(OURS + 1, &Wanted { capture: target("out", true), playback: None }).is_empty());
    }
}
