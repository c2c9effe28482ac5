"""Source rewrites shared by the tests/gpu/emu generators: a checked replace
and the kernel launches (<<<>>> -> emu_launchv)."""
import re


def rep(s, old, new, count=1):
    assert s.count(old) >= 1, 'pattern not found: %r' % old
    return s.replace(old, new, count)


def launches(s):
    """kernel<<<g, b[, smem[, stream]]>>>(args); -> emu_launchv(kernel, dim3(g), dim3(b), smem, args);"""
    out, pos, n = [], 0, 0
    while True:
        i = s.find('<<<', pos)
        if i < 0:
            break
        # the kernel expression: an identifier, maybe with <template args>
        j = i
        if s[j - 1] == '>':
            depth = 0
            while True:
                j -= 1
                if s[j] == '>':
                    depth += 1
                elif s[j] == '<':
                    depth -= 1
                    if depth == 0:
                        break
        m = re.search(r'[A-Za-z_][A-Za-z_0-9]*$', s[:j])
        assert m, 'no kernel name before <<< at %d' % i
        k0 = m.start()
        kernel = s[k0:i]
        e = s.index('>>>', i)
        cfg = s[i + 3:e]
        # split the launch configuration at top-level commas
        parts, depth, cur = [], 0, ''
        for ch in cfg:
            if ch in '([{':
                depth += 1
            elif ch in ')]}':
                depth -= 1
            if ch == ',' and depth == 0:
                parts.append(cur.strip())
                cur = ''
            else:
                cur += ch
        parts.append(cur.strip())
        assert 2 <= len(parts) <= 4, cfg
        smem = parts[2] if len(parts) > 2 else '0'
        assert s[e + 3] == '(', 'launch without arguments'
        # the argument list: balanced parentheses
        depth, a = 0, e + 3
        while True:
            if s[a] == '(':
                depth += 1
            elif s[a] == ')':
                depth -= 1
                if depth == 0:
                    break
            a += 1
        args = s[e + 4:a]
        out.append(s[pos:k0])
        out.append('emu_launchv(%s, dim3(%s), dim3(%s), (size_t)(%s), %s)' % (kernel, parts[0], parts[1], smem, args))
        pos = a + 1
        n += 1
    out.append(s[pos:])
    return ''.join(out), n
