// eslint for web/ (flat config): the recommended rules, with the globals of where each part runs.
// The same tools and versions as integrations/companion (`npm run lint` there and here).
import js from '@eslint/js';
import globals from 'globals';

export default [
  { ignores: ['node_modules/'] },
  js.configs.recommended,
  {
    languageOptions: { ecmaVersion: 'latest', sourceType: 'module' },
    rules: {
      // As the Companion module's: `_name` marks an argument or a variable kept unused on purpose;
      // and `const { NAME, ...rest } = process.env` is how the tests leave a variable out.
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_(.+)', ignoreRestSiblings: true }],
    },
  },
  // The pages: the admin UI, the join page (the crew panel) and what both share.
  { files: ['admin/**', 'join/**', 'common/**'], languageOptions: { globals: globals.browser } },
  // The browser tests and the benchmarks run in Node and drive Chromium with Playwright: the
  // functions they hand to `page.evaluate` and the like run in the page, hence both sets.
  {
    files: ['tests/**', 'bench/**', 'eslint.config.mjs'],
    languageOptions: { globals: { ...globals.node, ...globals.browser } },
  },
];
