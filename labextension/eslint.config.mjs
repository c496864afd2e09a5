// The extension's lint (jlpm lint:check, run by tests/labextension/test_lint.py):
// ESLint's and typescript-eslint's recommended rules, as jupyterlab-git lints its
// sources, plus the naming JupyterLab's own packages keep (interfaces start with I).
import js from '@eslint/js';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['lib/', 'node_modules/', '../wasm_kernel/labextension/', '*.config.*'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['src/**/*.ts', 'test/**/*.ts'],
    languageOptions: { globals: { ...globals.browser } },
    rules: {
      '@typescript-eslint/naming-convention': [
        'error',
        { selector: 'interface', format: ['PascalCase'], custom: { regex: '^I[A-Z]', match: true } }
      ],
      '@typescript-eslint/no-unused-vars': ['error', { args: 'none', ignoreRestSiblings: true }],
      eqeqeq: 'error',
      curly: ['error', 'all'],
      'prefer-const': 'error'
    }
  },
  {
    files: ['test/**/*.ts'],
    languageOptions: { globals: { ...globals.jest, ...globals.node } },
    rules: {
      // jest.mock factories build stand-ins for JupyterLab's widgets out of loosely typed parts.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-require-imports': 'off'
    }
  }
);
