// SPDX-License-Identifier: Apache-2.0 (as XSched, which links it)
#include "ipc/ipc.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ipc {
namespace {
socklen_t address(ChannelKey key, sockaddr_un *a)
{
    std::memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    int n = std::snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "xsched-ipc-%llu",
                          (unsigned long long)key);
    return (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + n);
}
} // namespace

Node::Node(ChannelKey key, NodeType type) : key_(key), type_(type)
{
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0 || type_ != NodeType::kReceiver)
        return;
    sockaddr_un a;
    socklen_t len = address(key_, &a);
    if (bind(fd_, (sockaddr *)&a, len) != 0) {
        std::fprintf(stderr, "ipc stand-in: bind key %llu: %s\n", (unsigned long long)key_,
                     std::strerror(errno));
    }
}

Node::~Node()
{
    Remove();
    if (fd_ >= 0)
        close(fd_);
}

bool Node::Send(const void *data, std::size_t size)
{
    if (fd_ < 0 || removed_)
        return false;
    sockaddr_un a;
    socklen_t len = address(key_, &a);
    for (;;) {
        ssize_t r = sendto(fd_, data, size, MSG_NOSIGNAL, (sockaddr *)&a, len);
        if (r == (ssize_t)size)
            return true;
        if (r < 0 && errno == EINTR)
            continue;
        return false;
    }
}

std::shared_ptr<Buffer> Node::Receive()
{
    if (fd_ < 0)
        return nullptr;
    std::vector<char> buf(1 << 16);
    for (;;) {
        ssize_t r = recv(fd_, buf.data(), buf.size(), 0);
        if (r > 0) {
            buf.resize((std::size_t)r);
            return std::make_shared<Buffer>(std::move(buf));
        }
        if (r < 0 && errno == EINTR)
            continue;
        return nullptr; // 0 after shutdown(): the node was removed
    }
}

void Node::Remove()
{
    if (fd_ < 0 || removed_)
        return;
    removed_ = true;
    shutdown(fd_, SHUT_RDWR);
}
} // namespace ipc
