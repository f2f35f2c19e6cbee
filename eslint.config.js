// ESLint flat config. Every TypeScript file (src/, test/, bench/) is linted with type information
// from tsconfig.test.json, the one project that includes all three, so the promise rules see the
// real types: a floating promise or a promise passed where a void callback is expected is an error.
import eslint from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  {
    // Build outputs and scratch copies of them (see .gitignore); node_modules is ignored by default.
    ignores: ['dist/', 'dist-test/', '.h*-dist/', '.m-dist/'],
  },
  eslint.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        project: './tsconfig.test.json',
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: {
      reportUnusedDisableDirectives: 'error',
    },
    rules: {
      // Already errors in recommendedTypeChecked; restated because the router's crash-safety
      // depends on them (a rejected promise nobody awaits is an unhandled rejection).
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // `void promise` does not count as handling it: that is how a throw in the data plane's
          // handler became an unhandled rejection. Fire-and-forget calls end in .catch(...).
          ignoreVoid: false,
          // node:test's describe/it/test return a promise that the runner itself awaits; its docs
          // say the return value of a top-level test can be discarded. A subtest (t.test) is not
          // listed here: its promise must still be awaited.
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite'] },
          ],
        },
      ],
      '@typescript-eslint/no-misused-promises': 'error',
      // A `let` that a callback reads before its one assignment (the HTTP server's data plane,
      // main.ts's `up`) cannot be a const; every other single-assignment `let` must be.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    // This file is plain JavaScript outside the TypeScript project.
    files: ['**/*.js'],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
