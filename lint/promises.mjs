// oxlint JS plugin (see .oxlintrc.json): promises whose rejection is handled too late.
//
// A promise that rejects while nothing handles it is an unhandled rejection:
// vitest fails the run although every test passed, and a user's process may
// die. The usual way to get one is to start a call, await something else, and
// only then attach the handler (expect(p).rejects, p.catch): if the call
// fails over the network meanwhile, its rejection comes in a later macrotask
// with no handler. The rule flags the two shapes seen in this tree:
// - `const p = call(); ... await other; ... expect(p).rejects / p.catch(...)`
// - `for (const p of [call(), call()]) { ... await p ... }`
// A promise expected to resolve (awaited plainly later) is not flagged: it
// rejects only in a run that fails anyway. Fix: handle as you create
// (`call().catch((e) => e)`, or the expectation made before the other await).

const isNode = (v) => v !== null && typeof v === 'object' && typeof v.type === 'string';
const isFunction = (n) => n.type === 'FunctionDeclaration' || n.type === 'FunctionExpression' || n.type === 'ArrowFunctionExpression';
const isCall = (n) => n !== null && n !== undefined && (n.type === 'CallExpression' || n.type === 'NewExpression' || (n.type === 'ChainExpression' && isCall(n.expression)));

/** Every node under `root` (the root excluded), in source order, with its parent; nested functions only if `intoFunctions`. */
function descendants(root, intoFunctions) {
  const out = [];
  const visit = (node) => {
    for (const key of Object.keys(node)) {
      if (key === 'parent' || key === 'range' || key === 'loc') continue;
      const value = node[key];
      for (const child of Array.isArray(value) ? value : [value]) {
        if (!isNode(child)) continue;
        out.push({ node: child, parent: node });
        if (intoFunctions || !isFunction(child)) visit(child);
      }
    }
  };
  visit(root);
  return out;
}

const nameOf = (callee) => (callee.type === 'Identifier' ? callee.name : callee.type === 'MemberExpression' && callee.property.type === 'Identifier' ? callee.property.name : '');

/** A use of `id` that handles a rejection: p.catch(...), p.then(a, b), expect(p).rejects. */
function handlesRejection(id, parent, parents) {
  if (parent.type === 'MemberExpression' && parent.object === id && parent.property.type === 'Identifier') {
    const call = parents.get(parent);
    if (parent.property.name === 'catch') return true;
    if (parent.property.name === 'then' && call?.type === 'CallExpression' && call.arguments.length >= 2) return true;
  }
  if (parent.type === 'CallExpression' && parent.arguments[0] === id && nameOf(parent.callee) === 'expect') {
    const member = parents.get(parent);
    return member?.type === 'MemberExpression' && member.property.type === 'Identifier' && member.property.name === 'rejects';
  }
  return false;
}

/** `for (const p of ...) { ... await p / await p.catch(...) ... }`: the loop's elements are promises awaited in turn. */
function awaitsLoopVariable(loop) {
  const declared = loop.left.type === 'VariableDeclaration' ? loop.left.declarations[0]?.id : loop.left;
  if (declared?.type !== 'Identifier') return false;
  const isVariable = (n) => n.type === 'Identifier' && n.name === declared.name;
  return descendants(loop.body, false).some(({ node: n }) => {
    if (n.type !== 'AwaitExpression') return false;
    const a = n.argument;
    return isVariable(a) || (a.type === 'CallExpression' && a.callee.type === 'MemberExpression' && isVariable(a.callee.object) && ['catch', 'then', 'finally'].includes(nameOf(a.callee)));
  });
}

const lateHandler = {
  meta: { type: 'problem', docs: { description: 'A promise made before an await whose rejection is handled only after it.' } },
  create(context) {
    const check = (fn) => {
      if (fn.body.type !== 'BlockStatement') return;
      const all = descendants(fn.body, true);
      const parents = new Map(all.map(({ node, parent }) => [node, parent]));
      const own = descendants(fn.body, false);
      const awaits = own.filter(({ node }) => node.type === 'AwaitExpression' || (node.type === 'ForOfStatement' && node.await));
      for (const { node } of own) {
        if (node.type === 'VariableDeclarator' && node.id.type === 'Identifier' && isCall(node.init)) {
          const refs = all.filter(({ node: n, parent }) => n.type === 'Identifier' && n.name === node.id.name && n.start > node.end && !(parent.type === 'MemberExpression' && parent.property === n && !parent.computed) && !(parent.type === 'Property' && parent.key === n && !parent.shorthand));
          if (refs.length === 0) continue;
          const handler = refs.find(({ node: n, parent }) => handlesRejection(n, parent, parents));
          // Only when the handler is the promise's first use: anything before it (Promise.all, a helper) may handle it already.
          if (handler === undefined || handler !== refs[0]) continue;
          const between = awaits.find(({ node: a }) => a.start > node.end && a.end <= handler.node.start);
          if (between !== undefined) context.report({ node, message: `'${node.id.name}' may reject while the await on line ${between.node.loc?.start.line ?? '?'} is pending, before its handler is attached: handle it as it is made.` });
        }
        if (node.type === 'ForOfStatement' && node.right.type === 'ArrayExpression' && node.right.elements.filter((e) => e?.type === 'CallExpression').length >= 2 && awaitsLoopVariable(node)) {
          context.report({ node: node.right, message: 'These calls run at once but are awaited one after the other: one rejecting while another is awaited is unhandled. Await them together (Promise.all / allSettled) or handle each as it is made.' });
        }
      }
    };
    return { FunctionDeclaration: check, FunctionExpression: check, ArrowFunctionExpression: check };
  },
};

export default { meta: { name: 'lockcheck' }, rules: { 'late-rejection-handler': lateHandler } };
