"""Forms of the researcher's study screens: a study's name (unique per creator), the
add-study form (classes typed in, one per line), the members form (people added or created
with their role and class) and the write-only AI key of the assisted and critique studies'
settings."""

from __future__ import annotations

from django import forms

from annotations.core.models import Study, StudyClass, StudyMembership, User
from annotations.core.selectors import study_name_taken
from annotations.core.services.studies import NewMember, study_roles

CLASS_NAME_MAX = StudyClass._meta.get_field("name").max_length


class StudyNameForm(forms.BaseForm):
    """Mixed into every form that names a study: the name must differ from the creator's
    other studies' names, and only those (a global check would tell a researcher which names
    other researchers use). The admin's ``get_form`` sets ``study_creator`` (the study's
    creator; the user for a new one) and ``creator_is_user``."""

    study_creator: User | None = None
    creator_is_user = True

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        instance = getattr(self, "instance", None)
        pk = instance.pk if isinstance(instance, Study) else None
        if study_name_taken(name=name, created_by=self.study_creator, exclude_pk=pk):
            whose = "You already have" if self.creator_is_user else (
                f"Its creator ({self.study_creator}) already has")
            raise forms.ValidationError(f"{whose} a study named “{name}”; choose another name.")
        return name


class StudyForm(StudyNameForm, forms.ModelForm):
    """A study's change form (partitioned and assisted): its name checked as above (the
    admin's fieldsets give the other fields)."""

    class Meta:
        model = Study
        fields = ["name"]


def study_help_texts(form: type[forms.BaseForm], *, worker: str, task: str,
                     page: str) -> type[forms.BaseForm]:
    """``form`` (a study form class made for one request) with the help texts of the fields
    every type shares in that type's words: who reads the guidelines, on which page, and
    who holds a ``task`` for the lease (the model's texts are the partitioned ones)."""
    texts = {"guidelines": f"Shown to every {worker} on {page} (Markdown; raw HTML is "
                           "removed).",
             "lease_minutes": f"How long a {worker} may hold a {task}, in minutes, before it "
                              "goes back to the pool; renewed while they are active on the "
                              "page."}
    for name, text in texts.items():
        if name in form.base_fields:
            form.base_fields[name].help_text = text
    return form


def classes_parse(text: str) -> list[tuple[str, str]]:
    """One class per non-empty line, class 0 first: ``name`` or ``name: description``."""
    pairs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, _, description = line.partition(": ")
        pairs.append((name.strip().rstrip(":").strip(), description.strip()))
    return pairs


class StudyAddForm(StudyNameForm, forms.ModelForm):
    """Everything a new study needs before members can be added: its settings and classes."""

    classes = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5, "cols": 50,
                                     "placeholder": "A\nB\nC\nD"}),
        help_text="One class per line, in order (the first line is class 0). Optionally a "
        "description after a colon and a space: <code>Cat: any domestic cat</code>. "
        "Multiple-choice items with their own answer texts: name the classes by position "
        "(A, B, C, D). Named categories shared by every item (Cat, Dog, Bird): give the "
        "items no options. At least 2 classes; complementary estimates need 3.",
    )

    class Meta:
        model = Study
        fields = ["name", "description", "queries_per_item", "lease_minutes",
                  "shuffle_options", "gold_rate", "target_ci_width", "interval_method"]

    def clean_classes(self) -> list[tuple[str, str]]:
        pairs = classes_parse(self.cleaned_data["classes"])
        if len(pairs) < 2:
            raise forms.ValidationError(f"Give at least 2 classes, one per line "
                                        f"(you gave {len(pairs)}).")
        names = [n for n, _ in pairs]
        if not all(names):
            raise forms.ValidationError("A line has a description but no class name.")
        long = [n for n in names if len(n) > CLASS_NAME_MAX]
        if long:
            raise forms.ValidationError(f"Class name '{long[0][:40]}…' is longer than "
                                        f"{CLASS_NAME_MAX} characters.")
        folded = [n.casefold() for n in names]
        repeated = sorted({n for n in names if folded.count(n.casefold()) > 1})
        if repeated:
            raise forms.ValidationError(f"Class names must differ: '{repeated[0]}' repeats.")
        return pairs


class MemberForm(forms.Form):
    """One person: a new user name (an account is created) or a member of another of your
    studies; one of the roles the study's type uses (``study_roles``); a class for
    specialists."""

    username = forms.CharField(label="User name", max_length=150, required=False)
    role = forms.ChoiceField()
    study_class = forms.TypedChoiceField(label="Class (specialists)", required=False,
                                         coerce=int, empty_value=None)
    email = forms.EmailField(label="E-mail (optional)", required=False)

    def __init__(self, *args, study: Study, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["role"].choices = study_roles(study.kind)
        if StudyMembership.Role.SPECIALIST in dict(self.fields["role"].choices):
            self.fields["study_class"].choices = [("", "—")] + [
                (c.index, c.name) for c in study.classes.order_by("index")]
        else:  # no specialists, no classes to choose
            del self.fields["study_class"]

    who = "username"  # the field that says someone is to be added

    def clean(self):
        data = super().clean()
        if not data.get(self.who):
            return data
        is_specialist = data.get("role") == StudyMembership.Role.SPECIALIST
        if is_specialist and data.get("study_class") is None:
            self.add_error("study_class", "A specialist needs a class.")
        if not is_specialist and data.get("study_class") is not None:
            self.add_error("study_class", "Only specialists have a class.")
        return data

    def member(self) -> NewMember | None:
        data = self.cleaned_data
        if not data.get("username"):
            return None
        return NewMember(username=data["username"], role=data["role"],
                         class_index=data.get("study_class"), email=data.get("email") or "")


class BulkMembersForm(MemberForm):
    """Many people with one role at once: a pasted list, one user name or e-mail address per
    line (an e-mail address is also the user name, so the person signs in with it)."""

    username = None
    email = None
    who = "people"
    field_order = ["people", "role", "study_class"]
    people = forms.CharField(
        label="People", required=False, widget=forms.Textarea(attrs={"rows": 5}),
        help_text="One per line: a user name or an e-mail address.")

    def clean_people(self) -> list[str]:
        lines = [line.strip() for line in self.cleaned_data["people"].splitlines()]
        people = [line for line in lines if line]
        for line in people:
            if "@" in line:
                try:
                    forms.EmailField().clean(line)
                except forms.ValidationError:
                    raise forms.ValidationError(f"'{line[:60]}' is not an e-mail address; "
                                                "give a user name or an address.") from None
        return people

    def members(self) -> list[NewMember]:
        data = self.cleaned_data
        return [NewMember(username=person, role=data["role"],
                          class_index=data.get("study_class"),
                          email=person if "@" in person else "")
                for person in data.get("people") or []]


class BaseMemberFormSet(forms.BaseFormSet):
    def __init__(self, *args, study: Study, **kwargs) -> None:
        self.study = study
        super().__init__(*args, **kwargs)

    def get_form_kwargs(self, index):
        return {**super().get_form_kwargs(index), "study": self.study}

    def members(self) -> list[NewMember]:
        return [m for m in (f.member() for f in self.forms) if m is not None]


MemberFormSet = forms.formset_factory(MemberForm, formset=BaseMemberFormSet, extra=6,
                                      max_num=50)
