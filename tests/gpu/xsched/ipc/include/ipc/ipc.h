// SPDX-License-Identifier: Apache-2.0 (as XSched, which links it)
// Stand-in for XpuOS/ipc: one receiver per key, any number of senders,
// message boundaries kept (SOCK_DGRAM), Receive() blocks and returns
// nullptr once the node is removed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ipc {
using ChannelKey = std::uint64_t;
enum class NodeType { kSender, kReceiver };

class Buffer {
public:
    explicit Buffer(std::vector<char> bytes) : bytes_(std::move(bytes)) {}
    const void *Data() const { return bytes_.data(); }
    std::size_t Size() const { return bytes_.size(); }
private:
    std::vector<char> bytes_;
};

// A channel's name outlives no process here (an abstract socket goes with
// its receiver), so there is nothing to remove by key.
class Channel {
public:
    static void Remove(ChannelKey) {}
};

class Node {
public:
    Node(ChannelKey key, NodeType type);
    ~Node();
    Node(const Node &) = delete;
    Node &operator=(const Node &) = delete;
    bool Send(const void *data, std::size_t size);
    std::shared_ptr<Buffer> Receive();
    void Remove();
private:
    ChannelKey key_;
    NodeType type_;
    int fd_ = -1;
    bool removed_ = false;
};
} // namespace ipc
