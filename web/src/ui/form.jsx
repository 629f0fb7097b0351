// Forms: values, and the API's errors shown next to the input named by error.data.field.
import { createContext } from 'preact';
import { useContext, useState } from 'preact/hooks';

const FormCtx = createContext(null);

/**
 * useForm(initial) -> form: form.values, form.set(name, v), form.submit(fn) runs fn(values) and, when
 * it rejects with an ApiError, keeps the message under the field it names (or over the form).
 */
export function useForm(initial) {
  const [values, setValues] = useState(initial);
  const [errors, setErrors] = useState({});
  const [busy, setBusy] = useState(false);
  const form = {
    values,
    errors,
    busy,
    set: (name, v) => setValues((s) => ({ ...s, [name]: v })),
    reset: (v = initial) => {
      setValues(v);
      setErrors({});
    },
    fail: (field, message) => setErrors({ [field || '_form']: message }),
    async submit(fn) {
      setBusy(true);
      setErrors({});
      try {
        return await fn(values);
      } catch (e) {
        const field = e.field && Object.prototype.hasOwnProperty.call(values, e.field) ? e.field : '_form';
        setErrors({ [field]: e.message + (e.key ? ` (${e.key})` : '') });
        return undefined;
      } finally {
        setBusy(false);
      }
    },
  };
  return form;
}

/** A <form> bound to form; onSubmit is called with the values. */
export function Form({ form, onSubmit, children, label, class: cls = '' }) {
  return (
    <FormCtx.Provider value={form}>
      <form
        class={'form ' + cls}
        aria-label={label}
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          form.submit(onSubmit);
        }}
      >
        {form.errors._form && (
          <p class="error" role="alert" data-field="_form">
            {form.errors._form}
          </p>
        )}
        {children}
      </form>
    </FormCtx.Provider>
  );
}

let uid = 0;
/** One labelled input: type text/number/password/select/checkbox/textarea.  The error of its name shows under it. */
export function Field({ name, label, type = 'text', options, hint, ...rest }) {
  const form = useContext(FormCtx);
  const [id] = useState(() => `f${++uid}-${name}`);
  const err = form.errors[name];
  const value = form.values[name];
  const common = {
    id,
    name,
    'aria-invalid': err ? 'true' : undefined,
    'aria-describedby': err ? id + '-err' : hint ? id + '-hint' : undefined,
    ...rest,
  };
  let input;
  if (type === 'select') {
    input = (
      <select {...common} value={value} onChange={(e) => form.set(name, e.currentTarget.value)}>
        {options.map((o) => (typeof o === 'string' ? { value: o, label: o } : o)).map((o) => (
          <option value={o.value}>{o.label}</option>
        ))}
      </select>
    );
  } else if (type === 'checkbox') {
    input = <input type="checkbox" {...common} checked={!!value} onChange={(e) => form.set(name, e.currentTarget.checked)} />;
  } else if (type === 'textarea') {
    input = <textarea {...common} value={value} onInput={(e) => form.set(name, e.currentTarget.value)} />;
  } else {
    input = <input type={type} {...common} value={value} onInput={(e) => form.set(name, e.currentTarget.value)} />;
  }
  return (
    <div class={'field' + (type === 'checkbox' ? ' check' : '')}>
      <label for={id}>{label}</label>
      {input}
      {hint && !err && (
        <small id={id + '-hint'} class="hint">
          {hint}
        </small>
      )}
      {err && (
        <small id={id + '-err'} class="error" role="alert" data-field={name}>
          {err}
        </small>
      )}
    </div>
  );
}

/** Comma or space separated names to a list. */
export function names(s) {
  return String(s || '')
    .split(/[\s,]+/)
    .filter(Boolean);
}
