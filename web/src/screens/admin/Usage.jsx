// Usage and cost (admin): GPU-hours and cost per slice over a period, and the price of each GPU shape.
import { useState } from 'preact/hooks';
import { egs } from '../../api.js';
import { useLoad } from '../../ui/hooks.js';
import { Card, ErrorBox, Loading } from '../../ui/misc.jsx';
import { Field, Form, useForm } from '../../ui/form.jsx';
import { fmtNum } from '../../ui/format.js';

export function Usage() {
  const [since, setSince] = useState('30d');
  const { data, error } = useLoad(() => egs.usage({ since }), [since]);
  const prices = useLoad(() => egs.prices(), []);
  const form = useForm({ gpuShape: '', pricePerGpuHour: '', currency: 'USD' });
  return (
    <>
      <h1>Usage and cost</h1>
      <div class="field inline">
        <label for="u-since">Period</label>
        <select id="u-since" value={since} onChange={(e) => setSince(e.currentTarget.value)}>
          {['1d', '7d', '30d', '90d'].map((s) => (
            <option value={s}>last {s}</option>
          ))}
        </select>
      </div>
      <ErrorBox error={error} />
      {!data ? (
        <Loading />
      ) : (
        <div class="scroll-x" tabIndex={0} role="region" aria-label="Usage per slice">
          <table>
            <thead>
              <tr>
                <th scope="col">Slice</th>
                <th scope="col">GPU-hours</th>
                <th scope="col">Cost ({data.currency})</th>
                <th scope="col">GPRs</th>
              </tr>
            </thead>
            <tbody>
              {data.items.map((u) => (
                <tr>
                  <td>{u.sliceName}</td>
                  <td>{fmtNum(u.gpuHours, 2)}</td>
                  <td>{u.cost}</td>
                  <td>{Array.isArray(u.gprs) ? u.gprs.length : u.gprs}</td>
                </tr>
              ))}
              {data.items.length === 0 && (
                <tr>
                  <td colSpan={4} class="empty">
                    No usage in this period.
                  </td>
                </tr>
              )}
            </tbody>
          </table>
        </div>
      )}
      <Card title="Prices" id="u-prices">
        <ul class="list">
          {((prices.data && prices.data.items) || []).map((p) => (
            <li>
              {p.gpuShape}: {p.pricePerGpuHour} {p.currency} per GPU-hour
            </li>
          ))}
        </ul>
        <Form
          form={form}
          label="Set a price"
          onSubmit={async (v) => {
            await egs.priceSet({ gpuShape: v.gpuShape, pricePerGpuHour: Number(v.pricePerGpuHour), currency: v.currency || undefined });
            form.reset();
            prices.reload();
          }}
        >
          <div class="cols">
            <Field name="gpuShape" label="GPU shape" />
            <Field name="pricePerGpuHour" label="Price per GPU-hour" type="number" step="any" />
            <Field name="currency" label="Currency" />
          </div>
          <button type="submit" disabled={form.busy}>
            Set price
          </button>
        </Form>
      </Card>
    </>
  );
}
